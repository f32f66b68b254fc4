-- Extends a running job's lease, if the caller still holds it.
--   KEYS: 1 job hash, 2 running zset
--   ARGV: 1 member, 2 lease token, 3 lease ttl (ms)
-- Returns 'ok' or 'lost'.
expect_types(KEYS[1], 'hash', KEYS[2], 'zset')
if not holds_lease(KEYS[1], ARGV[2]) then
  return 'lost'
end
local deadline = now_ms() + tonumber(ARGV[3])
redis.call('HSET', KEYS[1], 'deadline', deadline)
redis.call('ZADD', KEYS[2], deadline, ARGV[1])
return 'ok'
