-- Returns jobs whose lease expired (their worker crashed, hung or lost its
-- connection) to the queue, at their original place in line; a job whose
-- lease expired more than the stall bound is dead-lettered instead, so a
-- job that kills every worker that runs it cannot loop forever. A stall is
-- not a failed attempt: stalls and attempts have budgets of their own (a
-- deploy that kills a worker must not use up a job's retries), so the
-- attempt the crashed claim counted is given back. Also trims the
-- dead-letter set by age, so it shrinks in a quiet queue too.
--   KEYS: 1 running zset, 2 waiting zset, 3 dead zset, 4 seq counter,
--         5 urgent zset
--   ARGV: 1 key prefix, 2 max stalls, 3 batch limit, 4 dead max count,
--         5 dead max age (ms), 6 wake channel
-- A job whose dead letter's record holds another type (a hand edit) is
-- left as it is, in the running set, and its record's key is returned:
-- a sweep never overwrites a key of another type, nor fails half-way.
-- Returns {recovered, dead_lettered, {dead-letter entries made},
-- {keys of another type met}}.
expect_types(KEYS[1], 'zset', KEYS[2], 'zset', KEYS[3], 'zset', KEYS[5], 'zset')
expect_counter(KEYS[4])
local lanes = lanes_of(KEYS[2], KEYS[5])
local now = now_ms()
local expired = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[3]))
local recovered, dead, entries, foreign = 0, 0, {}, {}
for _, member in ipairs(expired) do
  local job = job_key(ARGV[1], member)
  local f = job_fields(job, 'state', 'job_id', 'followup', 'followup_lane', 'stalls')
  local stalls = (tonumber(f[5]) or 0) + 1
  local record = nil
  if f[1] == 'running' and stalls > tonumber(ARGV[2]) then
    record = dead_record_key(ARGV[1], set_entry(member, f[2] or '0'))
  end
  local record_type = record and redis.call('TYPE', record)['ok']
  if record_type and record_type ~= 'none' and record_type ~= 'hash' then
    foreign[#foreign + 1] = record
  else
    redis.call('ZREM', KEYS[1], member)
    if f[1] == 'running' then
      bump(job, 'stalls', 1)
      if record then
        dead = dead + 1
        local reason = 'stalled: the lease expired ' .. stalls .. ' times'
        entries[#entries + 1] = dead_letter(job, KEYS[3], ARGV[1], member, reason, now, ARGV[4],
          ARGV[5])
        redis.call('HSET', job, 'last_error', 'stalled')
        end_run(job, lanes, KEYS[4], ARGV[6], member, f[3], f[4], now, 'dead', ARGV[5])
        announce_settled(ARGV[1], member, 'dead')
      else
        recovered = recovered + 1
        bump(job, 'attempts', -1)
        requeue(job, lanes, ARGV[6], member, f[2], now)
      end
    end
  end
end
trim_dead(KEYS[3], ARGV[1], now, ARGV[4], ARGV[5])
return {recovered, dead, entries, foreign}
