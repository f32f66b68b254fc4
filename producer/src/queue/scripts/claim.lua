-- Takes the oldest job that may run now and gives it a lease.
--   KEYS: 1 waiting zset, 2 running zset
--   ARGV: 1 lease ttl (ms), 2 worker id, 3 key prefix, 4 nonce
-- Returns {'claimed', member, payload, job_id, attempt, lease token,
-- enqueued_at} or {'empty', score of the next delayed job or ''}.
-- A member whose job record is gone (data loss) is dropped and reported as
-- {'orphan', member} so the caller can count it and claim again.
local now = now_ms()
local member = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, 1)[1]
if not member then
  local next = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return {'empty', next[2] or ''}
end
redis.call('ZREM', KEYS[1], member)
local job = ARGV[3] .. 'job:' .. member
if redis.call('HGET', job, 'state') ~= 'waiting' then
  return {'orphan', member}
end
local attempt = redis.call('HINCRBY', job, 'attempts', 1)
local deadline = now + tonumber(ARGV[1])
local job_id = redis.call('HGET', job, 'job_id')
local token = job_id .. ':' .. attempt .. ':' .. ARGV[4]
redis.call('HSET', job, 'state', 'running', 'lease', token, 'deadline', deadline,
  'worker', ARGV[2], 'started_at', now)
redis.call('ZADD', KEYS[2], deadline, member)
return {'claimed', member, redis.call('HGET', job, 'payload'), job_id, tostring(attempt), token,
  redis.call('HGET', job, 'enqueued_at')}
