-- Ends a failed attempt: either schedules a retry or dead-letters the job.
-- A dead-lettered job still gets its recorded follow-up (the run ended).
--   KEYS: 1 job hash, 2 running zset, 3 waiting zset, 4 signal list,
--         5 dead zset, 6 seq counter
--   ARGV: 1 member, 2 lease token, 3 retry delay ms (-1: dead-letter now),
--         4 reason, 5 dead max count, 6 dead max age (ms), 7 signal list cap,
--         8 key prefix
-- Returns {'retry'}, {'dead'}, {'dead_followup', new job_id} or {'lost'}.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if redis.call('HGET', KEYS[1], 'state') ~= 'running' or redis.call('HGET', KEYS[1], 'lease') ~= ARGV[2] then
  return {'lost'}
end
redis.call('ZREM', KEYS[2], ARGV[1])
local delay = tonumber(ARGV[3])
if delay >= 0 then
  redis.call('HSET', KEYS[1], 'state', 'waiting', 'last_error', ARGV[4])
  redis.call('HDEL', KEYS[1], 'lease', 'deadline', 'worker')
  redis.call('ZADD', KEYS[3], now + delay, ARGV[1])
  redis.call('LPUSH', KEYS[4], 'retry')
  redis.call('LTRIM', KEYS[4], 0, tonumber(ARGV[7]) - 1)
  return {'retry'}
end
-- Dead-letter: a record of its own, so a new job for the entity cannot
-- overwrite what the operator needs to see.
local job_id = redis.call('HGET', KEYS[1], 'job_id')
local entry = ARGV[1] .. '|' .. job_id
local record = ARGV[8] .. 'dead:' .. entry
redis.call('DEL', record)
redis.call('HSET', record, 'member', ARGV[1], 'job_id', job_id,
  'payload', redis.call('HGET', KEYS[1], 'payload'),
  'attempts', redis.call('HGET', KEYS[1], 'attempts') or '0',
  'stalls', redis.call('HGET', KEYS[1], 'stalls') or '0',
  'reason', ARGV[4], 'failed_at', now)
redis.call('PEXPIRE', record, ARGV[6])
redis.call('ZADD', KEYS[5], now, entry)
-- Retention: by age, then by count; their records go with them.
local old = redis.call('ZRANGEBYSCORE', KEYS[5], '-inf', now - tonumber(ARGV[6]))
local excess = redis.call('ZRANGE', KEYS[5], 0, -(tonumber(ARGV[5]) + 1))
for _, list in ipairs({old, excess}) do
  for _, e in ipairs(list) do
    redis.call('ZREM', KEYS[5], e)
    redis.call('DEL', ARGV[8] .. 'dead:' .. e)
  end
end
local followup = redis.call('HGET', KEYS[1], 'followup')
if followup then
  local id = redis.call('INCR', KEYS[6])
  redis.call('DEL', KEYS[1])
  redis.call('HSET', KEYS[1], 'state', 'waiting', 'job_id', id, 'payload', followup,
    'attempts', 0, 'enqueued_at', now)
  redis.call('ZADD', KEYS[3], now, ARGV[1])
  redis.call('LPUSH', KEYS[4], id)
  redis.call('LTRIM', KEYS[4], 0, tonumber(ARGV[7]) - 1)
  return {'dead_followup', tostring(id)}
end
redis.call('HSET', KEYS[1], 'state', 'dead', 'last_error', ARGV[4])
redis.call('HDEL', KEYS[1], 'lease', 'deadline', 'worker')
redis.call('PEXPIRE', KEYS[1], ARGV[6])
return {'dead'}
