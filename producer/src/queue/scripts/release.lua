-- Hands a running job back to the queue without counting the attempt
-- (graceful shutdown: the worker stops before the job could finish).
-- A follow-up recorded while it ran is folded into it: the re-run reads
-- current data anyway; a manual follow-up's instructions are kept.
--   KEYS: 1 job hash, 2 running zset, 3 waiting zset, 4 signal list
--   ARGV: 1 member, 2 lease token, 3 signal list cap
-- Returns 'released' or 'lost'.
if not holds_lease(KEYS[1], ARGV[2]) then
  return 'lost'
end
redis.call('ZREM', KEYS[2], ARGV[1])
if redis.call('HGET', KEYS[1], 'followup_manual') == '1' then
  redis.call('HSET', KEYS[1], 'payload', redis.call('HGET', KEYS[1], 'followup'))
end
redis.call('HDEL', KEYS[1], 'followup', 'followup_manual', 'lease', 'deadline', 'worker')
redis.call('HINCRBY', KEYS[1], 'attempts', -1)
redis.call('HSET', KEYS[1], 'state', 'waiting')
redis.call('ZADD', KEYS[3], waiting_score(now_ms(), redis.call('HGET', KEYS[1], 'job_id')), ARGV[1])
redis.call('LPUSH', KEYS[4], 'released')
redis.call('LTRIM', KEYS[4], 0, tonumber(ARGV[3]) - 1)
return 'released'
