-- Finishes a running job. If compaction was requested while it ran, exactly
-- one follow-up job is added in the same step.
--   KEYS: 1 job hash, 2 running zset, 3 waiting zset, 4 signal list,
--         5 done zset, 6 seq counter
--   ARGV: 1 member, 2 lease token, 3 done max count, 4 done max age (ms),
--         5 signal list cap
-- Returns {'done'}, {'followup', new job_id} or {'lost'} when the caller no
-- longer holds the lease (nothing is changed then).
if redis.call('HGET', KEYS[1], 'state') ~= 'running' or redis.call('HGET', KEYS[1], 'lease') ~= ARGV[2] then
  return {'lost'}
end
local now = now_ms()
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZADD', KEYS[5], now, ARGV[1] .. '|' .. redis.call('HGET', KEYS[1], 'job_id'))
redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', now - tonumber(ARGV[4]))
redis.call('ZREMRANGEBYRANK', KEYS[5], 0, -(tonumber(ARGV[3]) + 1))
local id = end_run(KEYS[1], KEYS[3], KEYS[4], KEYS[6], ARGV[1], now, ARGV[5], 'done', ARGV[4])
if id then
  return {'followup', tostring(id)}
end
return {'done'}
