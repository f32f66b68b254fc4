-- Requests the jobs of a batch of dead letters again and removes the
-- letters, in one step: a letter is retried exactly once however many
-- operators retry it at the same time, and a request is decided as every
-- request is (request_job: dedup against a live job of the entity, one
-- follow-up of a running one). The caller chose the letters (its filter)
-- and built each one's request; a letter no longer kept (retried, purged
-- or trimmed meanwhile) is left alone. The job id index loses each
-- removed letter's id.
--   KEYS: 1 dead zset, 2 waiting zset, 3 seq counter, 4 running zset,
--         5 urgent zset
--   ARGV: 1 key prefix, 2 wake channel, then six per letter: entry,
--         member, payload of a new job, payload of a follow-up, '1' when
--         the request is manual, lane
-- Returns one reply per letter, in order: {outcome, job_id} (outcome:
-- added | coalesced | followup), {'gone', '0'} or, for a letter's record
-- or its entity's job record holding another type (skipped and left as
-- it is, never a reason to fail half-way), {'skipped', '0', that key}.
expect_types(KEYS[1], 'zset', KEYS[2], 'zset', KEYS[4], 'zset', KEYS[5], 'zset')
expect_counter(KEYS[3])
local lanes = lanes_of(KEYS[2], KEYS[5])
local prefix, channel = ARGV[1], ARGV[2]
local replies = {}
for i = 3, #ARGV - 5, 6 do
  local entry, member = ARGV[i], ARGV[i + 1]
  local record = dead_record_key(prefix, entry)
  local job = job_key(prefix, member)
  local job_type = redis.call('TYPE', job)['ok']
  local record_type = redis.call('TYPE', record)['ok']
  if record_type ~= 'none' and record_type ~= 'hash' then
    replies[#replies + 1] = {'skipped', '0', record}
  elseif not redis.call('ZSCORE', KEYS[1], entry) or record_type == 'none' then
    -- An index entry left without its record goes too.
    redis.call('ZREM', KEYS[1], entry)
    redis.call('DEL', record)
    unindex_entries(prefix, {entry})
    replies[#replies + 1] = {'gone', '0'}
  elseif job_type ~= 'none' and job_type ~= 'hash' then
    replies[#replies + 1] = {'skipped', '0', job}
  else
    replies[#replies + 1] = request_job(job, lanes, KEYS[4], KEYS[3], channel, member,
      ARGV[i + 2], ARGV[i + 3], ARGV[i + 4] == '1', ARGV[i + 5], prefix)
    redis.call('ZREM', KEYS[1], entry)
    redis.call('DEL', record)
    -- The letter's job id is done with (a new job has its own id).
    unindex_entries(prefix, {entry})
  end
end
return replies
