-- Returns jobs whose lease expired (their worker crashed, hung or lost its
-- connection) to the queue; a job whose lease expired more than the stall
-- bound is dead-lettered instead, so a job that kills every worker that
-- runs it cannot loop forever.
--   KEYS: 1 running zset, 2 waiting zset, 3 signal list, 4 dead zset,
--         5 seq counter
--   ARGV: 1 key prefix, 2 max stalls, 3 batch limit, 4 dead max count,
--         5 dead max age (ms), 6 signal list cap
-- Returns {recovered, dead_lettered}.
local now = now_ms()
local expired = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[3]))
local recovered, dead = 0, 0
for _, member in ipairs(expired) do
  redis.call('ZREM', KEYS[1], member)
  local job = ARGV[1] .. 'job:' .. member
  if redis.call('HGET', job, 'state') == 'running' then
    local stalls = redis.call('HINCRBY', job, 'stalls', 1)
    redis.call('HDEL', job, 'lease', 'deadline', 'worker')
    if stalls > tonumber(ARGV[2]) then
      dead = dead + 1
      local reason = 'stalled: the lease expired ' .. stalls .. ' times'
      dead_letter(job, KEYS[4], ARGV[1], member, reason, now, ARGV[4], ARGV[5])
      redis.call('HSET', job, 'last_error', 'stalled')
      end_run(job, KEYS[2], KEYS[3], KEYS[5], member, now, ARGV[6], 'dead', ARGV[5])
    else
      recovered = recovered + 1
      redis.call('HSET', job, 'state', 'waiting')
      redis.call('ZADD', KEYS[2], waiting_score(now, redis.call('HGET', job, 'job_id')), member)
      redis.call('LPUSH', KEYS[3], 'recovered')
      redis.call('LTRIM', KEYS[3], 0, tonumber(ARGV[6]) - 1)
    end
  end
end
return {recovered, dead}
