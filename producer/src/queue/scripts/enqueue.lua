-- Requests a compaction of one entity, atomically deciding what that means.
--   KEYS: 1 job hash, 2 waiting zset, 3 signal list, 4 seq counter
--   ARGV: 1 member, 2 payload of a new job, 3 payload of a follow-up,
--         4 "1" when the request is manual, 5 signal list cap
-- Returns {outcome, job_id}; outcome is added | coalesced | followup.
local state = redis.call('HGET', KEYS[1], 'state')
local manual = ARGV[4] == '1'
if state == 'waiting' then
  -- The job reads current data when it starts: nothing to add. A manual
  -- request upgrades it, so its instructions are not lost.
  if manual then
    redis.call('HSET', KEYS[1], 'payload', ARGV[2])
  end
  return {'coalesced', redis.call('HGET', KEYS[1], 'job_id')}
end
if state == 'running' then
  -- Remember exactly one follow-up; a manual one wins over an automatic one.
  if manual or redis.call('HGET', KEYS[1], 'followup_manual') ~= '1' then
    redis.call('HSET', KEYS[1], 'followup', ARGV[3], 'followup_manual', manual and '1' or '0')
  end
  return {'followup', redis.call('HGET', KEYS[1], 'job_id')}
end
local id = add_job(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[1], ARGV[2], now_ms(), ARGV[5])
return {'added', tostring(id)}
