-- Registers a worker, or renews its registration: the worker is live until
-- `ttl` ms from now (server clock) unless it beats again. Entries whose
-- time ran out are dropped from the set (their hashes expire by themselves).
--   KEYS: 1 workers zset, 2 the worker's hash
--   ARGV: 1 worker id, 2 ttl (ms), then field, value pairs describing it
-- Returns the server time (ms) of the beat.
expect_types(KEYS[1], 'zset', KEYS[2], 'hash')
local now = now_ms()
local ttl = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
local fields = {'id', ARGV[1], 'heartbeat_at', now, 'expires_at', now + ttl}
for i = 3, #ARGV do
  fields[#fields + 1] = ARGV[i]
end
redis.call('HSET', KEYS[2], unpack(fields))
redis.call('PEXPIRE', KEYS[2], ttl)
return now
