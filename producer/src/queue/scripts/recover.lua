-- Returns jobs whose lease expired (their worker crashed, hung or lost its
-- connection) to the queue; a job whose lease expired more than the stall
-- bound is dead-lettered instead, so a job that kills every worker that
-- runs it cannot loop forever.
--   KEYS: 1 running zset, 2 waiting zset, 3 signal list, 4 dead zset,
--         5 seq counter
--   ARGV: 1 key prefix, 2 max stalls, 3 batch limit, 4 dead max count,
--         5 dead max age (ms), 6 signal list cap
-- Returns {recovered, dead_lettered}.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
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
      local job_id = redis.call('HGET', job, 'job_id')
      local entry = member .. '|' .. job_id
      local record = ARGV[1] .. 'dead:' .. entry
      redis.call('DEL', record)
      redis.call('HSET', record, 'member', member, 'job_id', job_id,
        'payload', redis.call('HGET', job, 'payload'),
        'attempts', redis.call('HGET', job, 'attempts') or '0', 'stalls', stalls,
        'reason', 'stalled: the lease expired ' .. stalls .. ' times', 'failed_at', now)
      redis.call('PEXPIRE', record, ARGV[5])
      redis.call('ZADD', KEYS[4], now, entry)
      local followup = redis.call('HGET', job, 'followup')
      if followup then
        local id = redis.call('INCR', KEYS[5])
        redis.call('DEL', job)
        redis.call('HSET', job, 'state', 'waiting', 'job_id', id, 'payload', followup,
          'attempts', 0, 'enqueued_at', now)
        redis.call('ZADD', KEYS[2], now, member)
      else
        redis.call('HSET', job, 'state', 'dead', 'last_error', 'stalled')
        redis.call('PEXPIRE', job, ARGV[5])
      end
    else
      recovered = recovered + 1
      redis.call('HSET', job, 'state', 'waiting')
      redis.call('ZADD', KEYS[2], now, member)
    end
    redis.call('LPUSH', KEYS[3], 'recovered')
  end
end
if dead > 0 then
  local old = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now - tonumber(ARGV[5]))
  local excess = redis.call('ZRANGE', KEYS[4], 0, -(tonumber(ARGV[4]) + 1))
  for _, list in ipairs({old, excess}) do
    for _, e in ipairs(list) do
      redis.call('ZREM', KEYS[4], e)
      redis.call('DEL', ARGV[1] .. 'dead:' .. e)
    end
  end
end
redis.call('LTRIM', KEYS[3], 0, tonumber(ARGV[6]) - 1)
return {recovered, dead}
