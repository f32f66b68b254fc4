-- Shared by every script: prepended to each one when the scripts are built
-- (Redis Lua has no includes). Job hash fields:
--   state        waiting | running | done | dead
--   job_id       id of the entity's current job (from the seq counter)
--   payload      versioned JSON: entity key and trigger
--   attempts     claims of this job so far; stalls: leases that expired
--   enqueued_at  server ms the job was added
--   lease, deadline, worker, started_at   while running
--   followup, followup_manual             a request arrived while running
--   last_error   reason of the last failed attempt

-- Server time in ms: every worker agrees on it, whatever its own clock.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Score of a job in the waiting set: the time it may run (ms) with the job
-- id as tie-breaker, so jobs of the same millisecond run in the order they
-- were added. ms * 1024 stays exact in a Lua double until the 23rd century.
local SCORE_SCALE = 1024
local function waiting_score(ms, job_id)
  return ms * SCORE_SCALE + (tonumber(job_id) % SCORE_SCALE)
end

-- Replaces the entity's job record with a new waiting job and wakes a
-- worker. Returns the new job id.
local function add_job(job, waiting, signal, seq, member, payload, now, signal_cap)
  local id = redis.call('INCR', seq)
  redis.call('DEL', job)
  redis.call('HSET', job, 'state', 'waiting', 'job_id', id, 'payload', payload,
    'attempts', 0, 'enqueued_at', now)
  redis.call('ZADD', waiting, waiting_score(now, id), member)
  redis.call('LPUSH', signal, id)
  redis.call('LTRIM', signal, 0, tonumber(signal_cap) - 1)
  return id
end

-- Copies the entity's current job into a dead-letter record of its own (so
-- a new job cannot overwrite what the operator needs to see), then trims
-- the dead-letter set by age and count, records included.
local function dead_letter(job, dead, prefix, member, reason, now, max_count, max_age)
  local job_id = redis.call('HGET', job, 'job_id')
  local entry = member .. '|' .. job_id
  local record = prefix .. 'dead:' .. entry
  redis.call('DEL', record)
  redis.call('HSET', record, 'member', member, 'job_id', job_id,
    'payload', redis.call('HGET', job, 'payload') or '',
    'attempts', redis.call('HGET', job, 'attempts') or '0',
    'stalls', redis.call('HGET', job, 'stalls') or '0',
    'reason', reason, 'failed_at', now)
  redis.call('PEXPIRE', record, max_age)
  redis.call('ZADD', dead, now, entry)
  local old = redis.call('ZRANGEBYSCORE', dead, '-inf', now - tonumber(max_age))
  local excess = redis.call('ZRANGE', dead, 0, -(tonumber(max_count) + 1))
  for _, list in ipairs({old, excess}) do
    for _, e in ipairs(list) do
      redis.call('ZREM', dead, e)
      redis.call('DEL', prefix .. 'dead:' .. e)
    end
  end
end

-- Ends a run that will not be retried: adds the follow-up recorded while
-- it ran, if any (returning its id), or leaves the record in `final_state`
-- to expire after `ttl` ms.
local function end_run(job, waiting, signal, seq, member, now, signal_cap, final_state, ttl)
  local followup = redis.call('HGET', job, 'followup')
  if followup then
    return add_job(job, waiting, signal, seq, member, followup, now, signal_cap)
  end
  redis.call('HSET', job, 'state', final_state, 'finished_at', now)
  redis.call('HDEL', job, 'lease', 'deadline', 'worker')
  redis.call('PEXPIRE', job, ttl)
  return nil
end

-- Takes the oldest job of `waiting` that may run now and leases it to
-- `worker`. Returns the reply of claim.lua (see there).
local function claim_next(waiting, running, prefix, lease_ttl, worker, nonce, now)
  local due = now * SCORE_SCALE + SCORE_SCALE - 1
  local member = redis.call('ZRANGEBYSCORE', waiting, '-inf', due, 'LIMIT', 0, 1)[1]
  if not member then
    local next = redis.call('ZRANGE', waiting, 0, 0, 'WITHSCORES')
    if next[2] then
      local due_in = math.floor(tonumber(next[2]) / SCORE_SCALE) - now
      return {'empty', tostring(math.max(due_in, 0))}
    end
    return {'empty', ''}
  end
  redis.call('ZREM', waiting, member)
  local job = prefix .. 'job:' .. member
  if redis.call('HGET', job, 'state') ~= 'waiting' then
    return {'orphan', member}
  end
  local attempt = redis.call('HINCRBY', job, 'attempts', 1)
  local deadline = now + tonumber(lease_ttl)
  local job_id = redis.call('HGET', job, 'job_id')
  local token = job_id .. ':' .. attempt .. ':' .. nonce
  redis.call('HSET', job, 'state', 'running', 'lease', token, 'deadline', deadline,
    'worker', worker, 'started_at', now)
  redis.call('ZADD', running, deadline, member)
  local enqueued_at = redis.call('HGET', job, 'enqueued_at')
  local waited = math.max(now - (tonumber(enqueued_at) or now), 0)
  return {'claimed', member, redis.call('HGET', job, 'payload'), job_id, tostring(attempt), token,
    enqueued_at, tostring(waited)}
end

-- Whether the caller holds the lease of a running job.
local function holds_lease(job, token)
  return redis.call('HGET', job, 'state') == 'running' and redis.call('HGET', job, 'lease') == token
end

-- Finishes a running job (the caller checked the lease): records it in the
-- bounded `done` set and adds its follow-up, if one was requested. Returns
-- {'done'} or {'followup', new job_id}.
local function complete_run(job, running, waiting, signal, done, seq, member, now, done_max_count, done_max_age, signal_cap)
  redis.call('ZREM', running, member)
  redis.call('ZADD', done, now, member .. '|' .. redis.call('HGET', job, 'job_id'))
  redis.call('ZREMRANGEBYSCORE', done, '-inf', now - tonumber(done_max_age))
  redis.call('ZREMRANGEBYRANK', done, 0, -(tonumber(done_max_count) + 1))
  local id = end_run(job, waiting, signal, seq, member, now, signal_cap, 'done', done_max_age)
  if id then
    return {'followup', tostring(id)}
  end
  return {'done'}
end

