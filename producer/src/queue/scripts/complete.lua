-- Finishes a running job. If compaction was requested while it ran, exactly
-- one follow-up job is added in the same step.
--   KEYS: 1 job hash, 2 running zset, 3 waiting zset, 4 signal list,
--         5 done zset, 6 seq counter
--   ARGV: 1 member, 2 lease token, 3 done max count, 4 done max age (ms),
--         5 signal list cap
-- Returns {'done'}, {'followup', new job_id} or {'lost'} when the caller no
-- longer holds the lease (nothing is changed then).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if redis.call('HGET', KEYS[1], 'state') ~= 'running' or redis.call('HGET', KEYS[1], 'lease') ~= ARGV[2] then
  return {'lost'}
end
local job_id = redis.call('HGET', KEYS[1], 'job_id')
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZADD', KEYS[5], now, ARGV[1] .. '|' .. job_id)
redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', now - tonumber(ARGV[4]))
redis.call('ZREMRANGEBYRANK', KEYS[5], 0, -(tonumber(ARGV[3]) + 1))
local followup = redis.call('HGET', KEYS[1], 'followup')
if followup then
  local id = redis.call('INCR', KEYS[6])
  redis.call('DEL', KEYS[1])
  redis.call('HSET', KEYS[1], 'state', 'waiting', 'job_id', id, 'payload', followup,
    'attempts', 0, 'enqueued_at', now)
  redis.call('ZADD', KEYS[3], now, ARGV[1])
  redis.call('LPUSH', KEYS[4], id)
  redis.call('LTRIM', KEYS[4], 0, tonumber(ARGV[5]) - 1)
  return {'followup', tostring(id)}
end
redis.call('HSET', KEYS[1], 'state', 'done', 'finished_at', now)
redis.call('HDEL', KEYS[1], 'lease', 'deadline', 'worker')
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return {'done'}
