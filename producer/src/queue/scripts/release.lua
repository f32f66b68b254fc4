-- Hands a running job back to the queue without counting the attempt
-- (graceful shutdown: the worker stops before the job could finish), at its
-- original place in line. A follow-up recorded while it ran is folded into
-- it: the re-run reads current data anyway; a manual follow-up's
-- instructions are kept, and an urgent follow-up's lane.
--   KEYS: 1 job hash, 2 running zset, 3 waiting zset, 4 urgent zset
--   ARGV: 1 member, 2 lease token, 3 wake channel
-- Returns 'released' or 'lost'.
expect_types(KEYS[1], 'hash', KEYS[2], 'zset', KEYS[3], 'zset', KEYS[4], 'zset')
local f = redis.call('HMGET', KEYS[1], 'state', 'lease', 'job_id', 'followup', 'followup_manual',
  'followup_lane')
if f[1] ~= 'running' or f[2] ~= ARGV[2] then
  return 'lost'
end
redis.call('ZREM', KEYS[2], ARGV[1])
if f[5] == '1' then
  redis.call('HSET', KEYS[1], 'payload', f[4])
end
if lane_of(f[6]) == URGENT then
  redis.call('HSET', KEYS[1], 'lane', URGENT)
end
redis.call('HDEL', KEYS[1], 'followup', 'followup_manual', 'followup_lane')
bump(KEYS[1], 'attempts', -1)
requeue(KEYS[1], lanes_of(KEYS[3], KEYS[4]), ARGV[3], ARGV[1], f[3], now_ms())
return 'released'
