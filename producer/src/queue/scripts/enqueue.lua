-- Requests a compaction of one entity, atomically deciding what that means.
--   KEYS: 1 job hash, 2 waiting zset, 3 seq counter, 4 running zset
--   ARGV: 1 member, 2 payload of a new job, 3 payload of a follow-up,
--         4 "1" when the request is manual, 5 wake channel
-- Returns {outcome, job_id}; outcome is added | coalesced | followup.
-- A job record in a state whose set has lost its entry is put back there
-- (see repair_job): the request joins a job that will run.
expect_types(KEYS[1], 'hash', KEYS[2], 'zset', KEYS[4], 'zset')
expect_counter(KEYS[3])
local f = redis.call('HMGET', KEYS[1], 'state', 'job_id', 'followup_manual')
local manual = ARGV[4] == '1'
if f[1] == 'waiting' then
  repair_job(KEYS[1], KEYS[2], KEYS[4], ARGV[5], ARGV[1], now_ms())
  -- The job reads current data when it starts: nothing to add. A manual
  -- request upgrades it, so its instructions are not lost.
  if manual then
    redis.call('HSET', KEYS[1], 'payload', ARGV[2])
  end
  return {'coalesced', f[2] or '0'}
end
if f[1] == 'running' then
  repair_job(KEYS[1], KEYS[2], KEYS[4], ARGV[5], ARGV[1], now_ms())
  -- Remember exactly one follow-up; a manual one wins over an automatic one.
  if manual or f[3] ~= '1' then
    redis.call('HSET', KEYS[1], 'followup', ARGV[3], 'followup_manual', manual and '1' or '0')
  end
  return {'followup', f[2] or '0'}
end
local id = add_job(KEYS[1], KEYS[2], KEYS[3], ARGV[5], ARGV[1], ARGV[2], now_ms())
return {'added', tostring(id)}
