-- Extends a running job's lease, if the caller still holds it.
--   KEYS: 1 job hash, 2 running zset
--   ARGV: 1 member, 2 lease token, 3 lease ttl (ms)
-- Returns 'ok' or 'lost'.
-- A key of the wrong type is refused before anything is written by the
-- command that first touches it, not by a TYPE per key: the record by its
-- read, the running set by the ZADD that is the first write.
local f = call_checked('hash', 'HMGET', KEYS[1], 'state', 'lease')
if f[1] ~= 'running' or f[2] ~= ARGV[2] then
  return 'lost'
end
local deadline = digits(now_ms() + tonumber(ARGV[3]))
call_checked('zset', 'ZADD', KEYS[2], deadline, ARGV[1])
redis.call('HSET', KEYS[1], 'deadline', deadline)
return 'ok'
