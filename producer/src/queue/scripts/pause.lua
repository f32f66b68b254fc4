-- Pauses or resumes the whole queue or one domain, or only reads what is
-- paused. A pause is a mark in the pause record: paused jobs stay waiting
-- (in their lane, or parked by the claims that meet them: see claim_some),
-- requests for their entities coalesce as ever, running jobs finish. A
-- resume takes the mark off, puts the domain's parked jobs back in their
-- lanes at their place in line, and wakes idle workers. It moves at most
-- `batch` parked jobs per call, so a large parked set never holds Redis in
-- one script: 'unpark' moves the next batch of a domain that is not
-- paused (again), and the caller repeats it until none is left.
--   KEYS: 1 pause record (hash), 2 waiting zset, 3 urgent zset
--   ARGV: 1 key prefix, 2 wake channel, 3 'pause', 'resume', 'unpark' or
--         'state', 4 domain ('': the whole queue), 5 batch
-- Returns {queue paused at (ms, '' when it runs), {domain, paused at (ms),
-- parked jobs}..., oldest waiting job's age (ms, '' when none waits), now,
-- oldest runnable job's age (ms, '' when none), parked jobs of `domain`
-- left to move (0 unless resumed or unparked)}.
-- The age of a waiting job counts from when it could first run (added, or
-- its retry delay over), so a job backing off is not old; paused and
-- parked jobs count. The runnable age leaves out the jobs parked behind a
-- paused domain: what an alert on workers falling behind looks at.
local prefix, op, domain = ARGV[1], ARGV[3], ARGV[4]
expect_types(KEYS[1], 'hash', KEYS[2], 'zset', KEYS[3], 'zset')
local paused = pause_of(prefix)
-- Every parked set this call reads or writes is checked before any write.
local check = {}
for d in pairs(paused.domains) do
  check[#check + 1] = parked_key(prefix, d)
  check[#check + 1] = 'zset'
end
if domain ~= '' then
  check[#check + 1] = parked_key(prefix, domain)
  check[#check + 1] = 'zset'
end
expect_types(unpack(check))
local now = now_ms()
local field = PAUSED_QUEUE
if domain ~= '' then
  field = paused_field(domain)
end
if op == 'pause' then
  -- Pausing again keeps the first time: "paused since" stays true.
  redis.call('HSETNX', KEYS[1], field, now)
elseif op == 'resume' then
  redis.call('HDEL', KEYS[1], field)
end
local left = 0
-- `paused` was read before the resume took the mark off: an 'unpark' of a
-- domain paused again meanwhile moves nothing.
local unparking = domain ~= ''
  and (op == 'resume' or (op == 'unpark' and not paused.domains[domain]))
if unparking then
  local lanes = lanes_of(KEYS[2], KEYS[3])
  local parked = parked_key(prefix, domain)
  local flat = redis.call('ZRANGE', parked, 0, tonumber(ARGV[5]) - 1, 'WITHSCORES')
  local moved = {}
  for i = 1, #flat, 2 do
    local member = flat[i]
    local f = job_fields(job_key(prefix, member), 'state', 'lane')
    -- A record no longer waiting (gone, tampered with) leaves the set.
    if f[1] == 'waiting' then
      redis.call('ZADD', (lane_set(lanes, f[2])), 'NX', flat[i + 1], member)
    end
    moved[#moved + 1] = member
  end
  if #moved > 0 then
    redis.call('ZREM', parked, unpack(moved))
  end
  left = redis.call('ZCARD', parked)
end
if op == 'resume' or op == 'unpark' then
  redis.call('PUBLISH', ARGV[2], '0')
end
-- What is paused now, and the oldest waiting job, parked ones included.
paused = pause_of(prefix)
local queue_since = ''
if paused.queue then
  queue_since = redis.call('HGET', KEYS[1], PAUSED_QUEUE)
end
local domains = {}
local oldest
local function consider(key)
  local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  if first[2] then
    local at = math.floor(tonumber(first[2]) / SCORE_SCALE)
    if not oldest or at < oldest then
      oldest = at
    end
  end
end
consider(KEYS[2])
consider(KEYS[3])
local runnable = oldest
for d, since in pairs(paused.domains) do
  local parked = parked_key(prefix, d)
  domains[#domains + 1] = {d, tostring(since), redis.call('ZCARD', parked)}
  consider(parked)
end
local function age_of(at)
  if at then
    return tostring(math.max(now - at, 0))
  end
  return ''
end
return {queue_since, domains, age_of(oldest), now, age_of(runnable), left}
