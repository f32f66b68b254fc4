-- The ids of the workers whose registration has not run out (server clock).
--   KEYS: 1 workers zset
-- Returns {ids…}.
return redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now_ms(), '+inf')
