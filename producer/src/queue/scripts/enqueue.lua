-- Requests a compaction of one entity, atomically deciding what that means.
--   KEYS: 1 job hash, 2 waiting zset, 3 seq counter
--   ARGV: 1 member, 2 payload of a new job, 3 payload of a follow-up,
--         4 "1" when the request is manual, 5 wake channel
-- Returns {outcome, job_id}; outcome is added | coalesced | followup.
local f = redis.call('HMGET', KEYS[1], 'state', 'job_id', 'followup_manual')
local manual = ARGV[4] == '1'
if f[1] == 'waiting' then
  -- The job reads current data when it starts: nothing to add. A manual
  -- request upgrades it, so its instructions are not lost.
  if manual then
    redis.call('HSET', KEYS[1], 'payload', ARGV[2])
  end
  return {'coalesced', f[2]}
end
if f[1] == 'running' then
  -- Remember exactly one follow-up; a manual one wins over an automatic one.
  if manual or f[3] ~= '1' then
    redis.call('HSET', KEYS[1], 'followup', ARGV[3], 'followup_manual', manual and '1' or '0')
  end
  return {'followup', f[2]}
end
local id = add_job(KEYS[1], KEYS[2], KEYS[3], ARGV[5], ARGV[1], ARGV[2], now_ms())
return {'added', tostring(id)}
