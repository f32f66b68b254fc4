-- Shared by every script: prepended to each one when the scripts are built
-- (Redis Lua has no includes). Job hash fields:
--   state        waiting | running | done | dead
--   job_id       id of the entity's current job (from the seq counter)
--   payload      versioned JSON: entity key and trigger
--   attempts     claims of this job so far; stalls: leases that expired
--   enqueued_at  server ms the job was added
--   lease, deadline, worker, started_at   while running
--   lane         urgent | normal (absent: normal): the set it waits in
--   followup, followup_manual, followup_lane   a request arrived while running
--   last_error   reason of the last failed attempt
-- Job hashes are named <prefix>job:<member>; every key of a queue shares
-- the prefix's hash tag, so derived keys live in the slot of the declared
-- ones. Wake-ups are PUBLISHed on the queue's channel: a hint to idle
-- workers that a job may be there, never a claim.

-- Redis does not undo a script that fails half-way: what it wrote before
-- the failing command stays. A job record marked waiting before a failed
-- ZADD would be in no set, coalescing every later request into a job that
-- never runs. So every script does all its reads and checks first, and a
-- key of the wrong type (tampered with, or a clash of names) is refused
-- before anything is written (by expect_types, or by the first command
-- that touches the key, run before the first write or as it: see
-- call_checked). Derived keys met in a batch (a job record of another
-- type) are skipped, never a reason to fail half-way.

-- Names the scripts build themselves, from the queue's key prefix
-- (`{cq:<queue>}:`, an argument) and an entity's member. They must be the
-- names `Keys` builds in Rust (a test in the `scripts` module checks it),
-- and no script builds a key any other way.

-- An entity's job record (`Keys::job`).
local function job_key(prefix, member)
  return prefix .. 'job:' .. member
end

-- The member a job record's key names (the inverse of job_key).
local function member_of_job_key(prefix, key)
  return string.sub(key, #job_key(prefix, '') + 1)
end

-- An entry of the done and dead sets: one job of an entity.
local function set_entry(member, job_id)
  return member .. '|' .. job_id
end

-- The record of a dead-lettered job (`Keys::dead_record`).
local function dead_record_key(prefix, entry)
  return prefix .. 'dead:' .. entry
end

-- The job id index (`Keys::job_ids`): job id -> member, for looking a job
-- up by the id its logs show. Written where a job is added, cleaned where
-- the done and dead sets drop its entry.
local function job_ids_key(prefix)
  return prefix .. 'ids'
end

-- The mark of a lease an operator revoked (`Keys::revoked_lease`): an
-- attempt that had not yet taken its entity lease when its job was
-- cancelled finds it there, and does not start.
local function revoked_lease_key(prefix, token)
  return prefix .. 'revoked:' .. token
end

-- The key prefix of a job record's key, for helpers given only the record
-- (the inverse of job_key, on the other side).
local function prefix_of_job_key(job, member)
  return string.sub(job, 1, #job - #job_key('', member))
end

-- Whether the job id index may be written: it holds a hash or nothing. A
-- key of another type (a hand edit) costs lookups, never a script failing
-- half-way.
local function index_writable(index)
  local t = redis.call('TYPE', index)['ok']
  return t == 'hash' or t == 'none'
end

-- Drops the index entries of done or dead set entries (`member|job_id`)
-- that leave their set.
local function unindex_entries(prefix, entries)
  local ids = {}
  for _, e in ipairs(entries) do
    local id = string.match(e, '|(%d+)$')
    if id then
      ids[#ids + 1] = id
    end
  end
  if not index_writable(job_ids_key(prefix)) then
    return
  end
  -- In slices: far below Lua's unpack limit however many entries left.
  for i = 1, #ids, 1000 do
    redis.call('HDEL', job_ids_key(prefix), unpack(ids, i, math.min(i + 999, #ids)))
  end
end

-- An entity's release channel (`Keys::released_channel`).
local function released_channel(prefix, member)
  return prefix .. 'released:' .. member
end

-- The queue's pause record (`Keys::paused`): a hash with the field
-- PAUSED_QUEUE while the whole queue is paused, and one field per paused
-- domain (paused_field); each holds the server ms it was paused at.
local function paused_key(prefix)
  return prefix .. 'paused'
end

-- The parked jobs of a paused domain (`Keys::parked`): waiting jobs a claim
-- met while their domain was paused, scored as in their lane's set (their
-- record keeps the lane), so claims skip them once, not on every call.
local function parked_key(prefix, domain)
  return prefix .. 'parked:' .. domain
end

local PAUSED_QUEUE = 'queue'

-- A paused domain's field of the pause record. Prefixed, so no domain name
-- can be taken for PAUSED_QUEUE.
local function paused_field(domain)
  return 'domain:' .. domain
end

-- The domain of a member (`compact:<domain>:<entity_id>`), or nil.
local function domain_of(member)
  return string.match(member, '^compact:([^:]+):')
end

-- Refuses, with a WRONGTYPE error and before any write, unless each key
-- holds the type given after it (or nothing). Pairs: key, type, ….
local function expect_types(...)
  local spec = {...}
  for i = 1, #spec, 2 do
    local found = redis.call('TYPE', spec[i])['ok']
    if found ~= 'none' and found ~= spec[i + 1] then
      error({err = 'WRONGTYPE ' .. spec[i] .. ' holds a ' .. found .. ', not a ' ..
        spec[i + 1] .. ': nothing was changed'})
    end
  end
end

-- Runs `command` on `key` (and the rest), refused as expect_types refuses
-- when `key` holds a type other than `want`: the check folded into the
-- first command that touches the key, one call instead of a TYPE and the
-- command. A script that runs it before its first write, or as its first
-- write (Redis writes nothing when a command fails on the key's type), is
-- still refused before anything is written. Other errors are raised as
-- they are.
local function call_checked(want, command, key, ...)
  local reply = redis.pcall(command, key, ...)
  if type(reply) == 'table' and reply['err'] then
    if string.find(reply['err'], '^WRONGTYPE') then
      expect_types(key, want)
    end
    error(reply)
  end
  return reply
end

-- The value of the job id counter `seq` (false when absent), refused
-- unless it is a counter INCR can step (it counts from the value read).
local function counter_value(seq)
  local value = call_checked('string', 'GET', seq)
  if value and not (string.match(value, '^%d+$') and #value < 19) then
    error({err = 'WRONGTYPE ' .. seq .. ' is not a job id counter: nothing was changed'})
  end
  return value
end

-- Refuses unless `seq` is a counter INCR can step (or absent).
local function expect_counter(seq)
  counter_value(seq)
end

-- Runs read `command` on `key` (and the rest); nil when `key` holds
-- another type than the command reads, instead of failing the script
-- half-way. One call: the type is learnt from the command's own refusal,
-- not from a TYPE before it. Other errors are raised as they are.
local function read_or_nil(command, key, ...)
  local reply = redis.pcall(command, key, ...)
  if type(reply) == 'table' and reply['err'] then
    if string.find(reply['err'], '^WRONGTYPE') then
      return nil
    end
    error(reply)
  end
  return reply
end

-- HMGET of a job record's `fields`, all false when the key holds another
-- type (so a batch treats it like a missing record instead of failing
-- half-way).
local function job_fields(job, ...)
  local reply = read_or_nil('HMGET', job, ...)
  if reply == nil then
    local none = {}
    for i = 1, select('#', ...) do
      none[i] = false
    end
    return none
  end
  return reply
end

-- ZSCORE that cannot fail half-way: nil when `key` holds another type.
local function zscore_of(key, member)
  return read_or_nil('ZSCORE', key, member)
end

-- What is paused: {queue = true|false, domains = {[domain] = paused at ms}}.
-- A pause record of another type (tampered with) pauses nothing, rather
-- than failing a script half-way; the pause script refuses to touch it.
local function pause_of(prefix)
  local paused = {queue = false, domains = {}, any_domain = false}
  local flat = read_or_nil('HGETALL', paused_key(prefix))
  if flat == nil then
    return paused
  end
  for i = 1, #flat, 2 do
    local field = flat[i]
    if field == PAUSED_QUEUE then
      paused.queue = true
    else
      local domain = string.match(field, '^domain:(.+)$')
      if domain then
        paused.domains[domain] = tonumber(flat[i + 1]) or 0
        paused.any_domain = true
      end
    end
  end
  return paused
end

-- The two lanes of waiting jobs, sorted sets scored alike (the time a job
-- may run): `urgent` (manual and reactive requests, and the follow-ups
-- they made) is claimed before `normal` (automatic requests and theirs),
-- so a backlog of automatic jobs never delays a request that cannot wait.
-- A job record's `lane` says which set it is in; a record without one (an
-- older build wrote it) is in the normal lane. Dedup is per entity, not
-- per lane: an entity has one job, in one lane.
local URGENT, NORMAL = 'urgent', 'normal'

-- A lane's name from a field or argument: anything but 'urgent' (nothing,
-- an older record) is the normal lane.
local function lane_of(value)
  if value == URGENT then
    return URGENT
  end
  return NORMAL
end

-- The lanes' sets, from the keys a script was given.
local function lanes_of(waiting, urgent)
  return {normal = waiting, urgent = urgent}
end

-- The set of `lane`, and the other one (where a job of `lane` must not be).
local function lane_set(lanes, lane)
  if lane_of(lane) == URGENT then
    return lanes.urgent, lanes.normal
  end
  return lanes.normal, lanes.urgent
end

-- The more urgent of two lanes: a job's lane is raised, never lowered.
local function max_lane(a, b)
  if lane_of(a) == URGENT or lane_of(b) == URGENT then
    return URGENT
  end
  return NORMAL
end

-- Server time in ms: every worker agrees on it, whatever its own clock.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- An integer (a job id, ms, a score) as the digits a command is given.
-- Redis 7.0 formats a Lua number passed to a command with `%.17g`, which
-- costs more than the command itself; a string is passed as it is.
local function digits(n)
  return string.format('%d', n)
end

-- Score of a job in its lane's set: the time it may run (ms) with the job
-- id as tie-breaker, so jobs of the same millisecond run in the order they
-- were added. ms * 1024 stays exact in a Lua double until the 23rd century.
local SCORE_SCALE = 1024
local function waiting_score(ms, job_id)
  return ms * SCORE_SCALE + ((tonumber(job_id) or 0) % SCORE_SCALE)
end

-- Tells chat-side waiters that the entity's job left the running state
-- (`what`: done, followup, retry or dead), on the entity's release channel
-- where the worker announces the end of each run. The queue says it too,
-- because a run can end without an announcement of the worker's (nothing
-- to do), and because the worker announces before the queue has recorded
-- the end: a waiter that looks again on this notice sees the job settled.
local function announce_settled(prefix, member, what)
  redis.call('PUBLISH', released_channel(prefix, member), '{"settled":"' .. what .. '"}')
end

-- Replaces the entity's job record with a new waiting job `id` of `lane`
-- (its entry in the lane's set is the caller's), indexes the id in the
-- queue's job id index `index` and wakes a worker. `id` and `now` (ms) are
-- digits (see digits).
local function write_job(job, index, channel, member, payload, lane, id, now)
  redis.call('DEL', job)
  redis.call('HSET', job, 'state', 'waiting', 'job_id', id, 'payload', payload,
    'attempts', '0', 'enqueued_at', now, 'lane', lane)
  -- The job id index. One of another type (a hand edit) refuses the
  -- write and changes nothing (see index_writable): one call, no TYPE.
  redis.pcall('HSET', index, id, member)
  redis.call('PUBLISH', channel, id)
end

-- Replaces the entity's job record with a new waiting job in `lane` and
-- wakes a worker. Returns the new job id.
local function add_job(job, lanes, seq, channel, member, payload, lane, now)
  local id = redis.call('INCR', seq)
  lane = lane_of(lane)
  redis.call('ZADD', (lane_set(lanes, lane)), digits(waiting_score(now, id)), member)
  write_job(job, job_ids_key(prefix_of_job_key(job, member)), channel, member, payload, lane,
    digits(id), digits(now))
  return id
end

-- add_job for a request (request_job), checking each key it writes with
-- the first command that touches it (call_checked) rather than a TYPE
-- call per key: the counter is read first (the new id is the next value),
-- and the job's entry in its lane's set is the first write, so a key of
-- the wrong type is refused before anything is written. The job record
-- was read (a hash or nothing); `prefix` is the queue's key prefix.
-- Returns the new job id, as digits.
local function add_requested_job(job, lanes, seq, channel, member, payload, lane, prefix)
  local id = digits((tonumber(counter_value(seq)) or 0) + 1)
  local now = now_ms()
  call_checked('zset', 'ZADD', (lane_set(lanes, lane)), digits(waiting_score(now, id)), member)
  redis.call('INCR', seq)
  write_job(job, job_ids_key(prefix), channel, member, payload, lane_of(lane), id, digits(now))
  return id
end

-- HINCRBY that cannot fail half-way: a field that is not a number (a
-- record written by hand) counts as 0. Returns the new value.
local function bump(job, field, by)
  local n = math.floor(tonumber(redis.call('HGET', job, field)) or 0) + by
  redis.call('HSET', job, field, n)
  return n
end

-- Puts a job that was running back in its lane at its original place in
-- line (it was added at `enqueued_at`), and wakes a worker.
local function requeue(job, lanes, channel, member, job_id, now)
  local f = redis.call('HMGET', job, 'enqueued_at', 'lane')
  local enqueued_at = tonumber(f[1]) or now
  redis.call('HSET', job, 'state', 'waiting')
  redis.call('HDEL', job, 'lease', 'deadline', 'worker')
  redis.call('ZADD', (lane_set(lanes, f[2])), waiting_score(enqueued_at, job_id), member)
  redis.call('PUBLISH', channel, job_id)
end

-- Keeps the dead-letter set within its age and count bounds, records
-- included. Called when a job is dead-lettered and by every recovery sweep,
-- so entries whose record expired do not linger in a quiet queue.
local function trim_dead(dead, prefix, now, max_count, max_age)
  local old = redis.call('ZRANGEBYSCORE', dead, '-inf', now - tonumber(max_age))
  local excess = redis.call('ZRANGE', dead, 0, -(tonumber(max_count) + 1))
  for _, list in ipairs({old, excess}) do
    for _, e in ipairs(list) do
      redis.call('ZREM', dead, e)
      redis.call('DEL', dead_record_key(prefix, e))
    end
    unindex_entries(prefix, list)
  end
end

-- Copies the entity's current job into a dead-letter record of its own (so
-- a new job cannot overwrite what the operator needs to see), then trims
-- the dead-letter set by age and count, records included.
local function dead_letter(job, dead, prefix, member, reason, now, max_count, max_age)
  local f = redis.call('HMGET', job, 'job_id', 'payload', 'attempts', 'stalls')
  local job_id = f[1] or '0'
  local entry = set_entry(member, job_id)
  local record = dead_record_key(prefix, entry)
  redis.call('DEL', record)
  redis.call('HSET', record, 'member', member, 'job_id', job_id, 'payload', f[2] or '',
    'attempts', f[3] or '0', 'stalls', f[4] or '0', 'reason', reason, 'failed_at', now)
  redis.call('PEXPIRE', record, max_age)
  redis.call('ZADD', dead, now, entry)
  trim_dead(dead, prefix, now, max_count, max_age)
  return entry
end

-- Ends a run that will not be retried: adds the follow-up recorded while
-- it ran (`followup`, the payload, or false; in `followup_lane`),
-- returning its id, or leaves the record in `final_state` to expire after
-- `ttl` ms.
local function end_run(job, lanes, seq, channel, member, followup, followup_lane, now, final_state, ttl)
  if followup then
    return add_job(job, lanes, seq, channel, member, followup, followup_lane, now)
  end
  redis.call('HSET', job, 'state', final_state, 'finished_at', now)
  redis.call('HDEL', job, 'lease', 'deadline', 'worker')
  redis.call('PEXPIRE', job, ttl)
  return nil
end

-- Finishes the running jobs of `members` whose lease `tokens` still hold:
-- records them in the `done` set and adds the follow-ups requested while
-- they ran. Returns one completion per job, in order: {'done'},
-- {'followup', new job_id} or {'lost'} (nothing changed: that lease was
-- lost), and the done set's size after (nil when nothing finished, and
-- then nothing was written). The lease fields stay on a done record as
-- its history; only a running state makes a lease valid.
--
-- Every key it writes is refused, when of the wrong type, before the
-- first write, with no TYPE call on the common path: the records by their
-- reads (one of another type is no running job: 'lost'), the done set by
-- the size it reads anyway (for trim_done), the running set by the ZREM
-- that is the first write. The counter and the lanes, which only a
-- follow-up writes, are checked only when there is one.
local function complete_jobs(prefix, running, lanes, done, seq, channel, members, tokens, now, done_max_age)
  local completions, records, finished, done_entries = {}, {}, {}, {}
  local followups = false
  local at = digits(now)
  for i, member in ipairs(members) do
    local f = job_fields(job_key(prefix, member), 'state', 'lease', 'job_id', 'followup',
      'followup_lane')
    if f[1] ~= 'running' or f[2] ~= tokens[i] then
      completions[i] = {'lost'}
    else
      records[i] = f
      finished[#finished + 1] = member
      done_entries[#done_entries + 1] = at
      done_entries[#done_entries + 1] = set_entry(member, f[3] or '0')
      followups = followups or f[4] ~= false
    end
  end
  if #finished == 0 then
    return completions, nil
  end
  local size = call_checked('zset', 'ZCARD', done)
  if followups then
    expect_counter(seq)
    expect_types(lanes.normal, 'zset', lanes.urgent, 'zset')
  end
  -- One call each for the whole batch (at most 128 jobs: far below Lua's
  -- unpack limit).
  call_checked('zset', 'ZREM', running, unpack(finished))
  redis.call('ZADD', done, unpack(done_entries))
  for i, member in ipairs(members) do
    local f = records[i]
    if f then
      local job = job_key(prefix, member)
      if f[4] then
        local id = add_job(job, lanes, seq, channel, member, f[4], f[5], now)
        completions[i] = {'followup', tostring(id)}
        announce_settled(prefix, member, 'followup')
      else
        redis.call('HSET', job, 'state', 'done', 'finished_at', at)
        redis.call('PEXPIRE', job, done_max_age)
        completions[i] = {'done'}
        announce_settled(prefix, member, 'done')
      end
    end
  end
  return completions, size + #finished
end

-- Keeps the `done` set, of `size` entries, within its age and count
-- bounds. Entries past the age bound leave when the oldest one is that
-- old (one read on the common path; their records expire on their own,
-- PEXPIRE). Past the count bound by more than a 64th of it, the oldest
-- records go in one batch and are deleted, unless their entity has a
-- newer job by now: a busy queue at its bound trims once every
-- `max_count / 64` completions instead of on each one, and the set holds
-- at most that many entries over its bound (none below 64).
local function trim_done(prefix, done, now, max_count, max_age, size)
  max_count = tonumber(max_count)
  local cutoff = now - tonumber(max_age)
  local oldest = redis.call('ZRANGE', done, 0, 0, 'WITHSCORES')
  if oldest[2] and tonumber(oldest[2]) <= cutoff then
    local old = redis.call('ZRANGEBYSCORE', done, '-inf', cutoff)
    unindex_entries(prefix, old)
    redis.call('ZREMRANGEBYSCORE', done, '-inf', cutoff)
    size = size - #old
  end
  if size <= max_count + math.floor(max_count / 64) then
    return
  end
  local excess = redis.call('ZRANGE', done, 0, -(max_count + 1))
  -- The records to delete, in one DEL (a command per record was most of
  -- a trim's cost).
  local gone = {}
  for _, entry in ipairs(excess) do
    local member, job_id = string.match(entry, '^(.*)|(%d+)$')
    if member then
      local job = job_key(prefix, member)
      local f = job_fields(job, 'state', 'job_id')
      if f[1] == 'done' and f[2] == job_id then
        gone[#gone + 1] = job
      end
    end
  end
  -- In slices: far below Lua's unpack limit however many records go.
  for i = 1, #gone, 1000 do
    redis.call('DEL', unpack(gone, i, math.min(i + 999, #gone)))
  end
  if #excess > 0 then
    unindex_entries(prefix, excess)
    redis.call('ZREMRANGEBYRANK', done, 0, #excess - 1)
  end
end

-- At most this many jobs of paused domains are parked by one claim: a
-- backlog of a paused domain is set aside over many short calls (each a
-- few ms), never in one that holds Redis for the whole backlog (a claim
-- meeting 100,000 parked-to-be jobs took 0.93 s). A claim that stops there
-- finds the lane's next job due, so its caller claims again at once.
local PARK_BUDGET = 1000

-- Takes up to `wanted` of the oldest jobs that may run now, those of the
-- urgent lane before any of the normal lane's, and leases them to
-- `worker`. Nothing while the queue is paused; a job of a paused domain is
-- parked (see parked_key) instead, and the claim goes on past it, up to
-- PARK_BUDGET parked jobs. Returns a list of entries, each
--   {'claimed', member, payload, job_id, attempt, lease token, enqueued_at,
--    ms it waited}
-- or {'orphan', member} for a member whose job record is gone (data loss;
-- dropped), and, when fewer than `wanted` jobs are due, the ms until the
-- next delayed one of either lane is ('' if none waits):
-- {entries, next_due}.
--
-- `strict`: nothing was written before it in this call. Then a key of the
-- wrong type is refused before the claim's first write, with no TYPE on
-- the common path: each lane by its first read, the running set by the
-- ZADD that is the first write, the other lane (written only to take a
-- member out of both) by a TYPE only when the urgent lane has jobs. After
-- a completion's writes (not strict; the running set then was written
-- already), a lane of the wrong type is no reason to fail the call half
-- way: it has nothing to claim, and the next strict claim refuses it.
local function claim_some(lanes, running, prefix, lease_ttl, worker, nonce, now, wanted, strict)
  local entries = {}
  -- A paused queue hands out nothing (its jobs stay where they wait); the
  -- wake-up its resumption publishes brings idle workers back.
  local paused = pause_of(prefix)
  if paused.queue then
    return {entries, ''}
  end
  -- A read of a lane: refused on the wrong type when strict, else nil.
  local function lane_read(command, set, ...)
    if strict then
      return call_checked('zset', command, set, ...)
    end
    return read_or_nil(command, set, ...)
  end
  -- The parked set of each paused domain. One whose key holds another
  -- type (tampered with) could be neither parked into, which would
  -- overwrite it, nor claimed past, which would run a paused domain's
  -- jobs: nothing is claimed, refused by name when strict (as a lane of
  -- the wrong type is), until an operator moves the key aside.
  local parking = {}
  for domain in pairs(paused.domains) do
    local key = parked_key(prefix, domain)
    local t = redis.call('TYPE', key)['ok']
    if t ~= 'zset' and t ~= 'none' then
      if strict then
        expect_types(key, 'zset')
      end
      return {entries, ''}
    end
    parking[domain] = key
  end
  local due = digits(now * SCORE_SCALE + SCORE_SCALE - 1)
  local deadline = digits(now + tonumber(lease_ttl))
  local started_at = digits(now)
  local read = {}
  local parked_now = 0
  for _, lane in ipairs({URGENT, NORMAL}) do
    local set, other = lane_set(lanes, lane)
    while #entries < wanted and parked_now < PARK_BUDGET do
      -- At most `wanted` members (a batch, capped by the caller far below
      -- Lua's unpack limit), however long the backlog. A job of a paused
      -- domain met here is parked, once: the loop goes on past it.
      local flat = lane_read('ZRANGEBYSCORE', set, '-inf', due, 'WITHSCORES', 'LIMIT', 0,
        wanted - #entries)
      read[set] = true
      if not flat or #flat == 0 then
        break
      end
      if strict and not read[other] then
        expect_types(other, 'zset')
        read[other] = true
      end
      local members, scores = {}, {}
      for i = 1, #flat, 2 do
        members[#members + 1] = flat[i]
        scores[#scores + 1] = flat[i + 1]
      end
      -- Every record of the batch is read, and what each gets decided,
      -- before anything changes.
      local records, leases, leased = {}, {}, {}
      for i, member in ipairs(members) do
        local f = job_fields(job_key(prefix, member),
          'state', 'job_id', 'attempts', 'enqueued_at', 'payload')
        records[i] = f
        if f[1] ~= 'waiting' then
          entries[#entries + 1] = {'orphan', member}
        elseif not parking[domain_of(member) or ''] then
          f[2] = f[2] or '0'
          local attempt = digits((tonumber(f[3]) or 0) + 1)
          local token = f[2] .. ':' .. attempt .. ':' .. nonce
          leases[i] = {attempt, token}
          leased[#leased + 1] = deadline
          leased[#leased + 1] = member
          local enqueued_at = tonumber(f[4]) or now
          entries[#entries + 1] = {'claimed', member, f[5] or '', f[2], attempt, token,
            digits(enqueued_at), digits(math.max(now - enqueued_at, 0))}
        end
      end
      if #leased > 0 then
        call_checked('zset', 'ZADD', running, unpack(leased))
      end
      -- A member listed in both lanes (a hand edit, or a repair by a build
      -- that knew one lane only) leaves both: one claim, no stale entry.
      -- (The other lane, when of another type, lists nobody.)
      redis.call('ZREM', set, unpack(members))
      redis.pcall('ZREM', other, unpack(members))
      for i, member in ipairs(members) do
        local f = records[i]
        local lease = leases[i]
        if lease then
          redis.call('HSET', job_key(prefix, member), 'state', 'running', 'attempts', lease[1],
            'lease', lease[2], 'deadline', deadline, 'worker', worker, 'started_at', started_at)
        elseif f[1] == 'waiting' then
          -- Parked: still waiting, in its lane (the record's), at its
          -- place.
          redis.call('ZADD', parking[domain_of(member) or ''], scores[i], member)
          parked_now = parked_now + 1
        end
      end
    end
  end
  local next_due = ''
  if #entries < wanted then
    local soonest
    for _, set in ipairs({lanes.urgent, lanes.normal}) do
      local next = lane_read('ZRANGE', set, 0, 0, 'WITHSCORES')
      if next and next[2] then
        local at = math.floor(tonumber(next[2]) / SCORE_SCALE)
        if not soonest or at < soonest then
          soonest = at
        end
      end
    end
    if soonest then
      next_due = tostring(math.max(soonest - now, 0))
    end
  end
  return {entries, next_due}
end

-- Puts an entity's job back in the set its state says it is in, when the
-- set has no entry for it (the set was evicted or tampered with, or a
-- script failed half-way before every script checked first). Without it a
-- waiting record would coalesce every request into a job that never runs,
-- and a running one would never be recovered. A waiting job goes back in
-- line at its original place and a worker is woken; a running job is
-- tracked again at its lease deadline, so the recovery sweep returns it
-- as an expired lease once that has passed (a live holder renews it).
-- A waiting job goes back in the lane its record names (out of the other
-- one, should it be listed there), unless it is parked (its domain is
-- paused; `prefix` is the queue's key prefix, where the parked sets are).
-- Returns 'requeued', 'relisted' or false.
local function repair_job(job, lanes, running, channel, member, now, prefix)
  local f = job_fields(job, 'state', 'job_id', 'enqueued_at', 'deadline', 'lane')
  local set, other = lane_set(lanes, f[5])
  if f[1] == 'waiting' and not redis.call('ZSCORE', set, member) then
    -- A job parked while its domain is paused waits there, not lost; one
    -- left parked after its domain resumed goes back in line.
    local domain = prefix and domain_of(member)
    if domain then
      local parked = parked_key(prefix, domain)
      if zscore_of(parked, member) then
        if pause_of(prefix).domains[domain] then
          return false
        end
        redis.call('ZREM', parked, member)
      end
    end
    redis.call('ZREM', other, member)
    redis.call('ZADD', set, waiting_score(tonumber(f[3]) or now, f[2]), member)
    redis.call('PUBLISH', channel, f[2] or '0')
    return 'requeued'
  end
  if f[1] == 'running' and not redis.call('ZSCORE', running, member) then
    redis.call('ZADD', running, tonumber(f[4]) or 0, member)
    return 'relisted'
  end
  return false
end

-- Moves a waiting job to the urgent lane at the same place in time (a
-- retry's delay still holds), for an urgent request coalesced into it.
local function make_urgent(job, lanes, member)
  local score = redis.call('ZSCORE', lanes.normal, member)
  if score then
    redis.call('ZREM', lanes.normal, member)
    redis.call('ZADD', lanes.urgent, score, member)
  end
  redis.call('HSET', job, 'lane', URGENT)
end

-- The requests most are, decided with few of the prelude's definitions (a
-- script has each definition it uses made on every call; see
-- `with_prelude` in scripts.rs): a new job for an entity with no live job
-- (`payload`, in `lane`), and a request joining a job waiting in its lane's
-- set that it leaves as it is (neither manual nor urgent for a job of the
-- normal lane). Each key is checked by the first command that touches it
-- (see call_checked), before anything is written. Returns the reply of
-- request_job, or nil and the fields of the job record read, for
-- request_rest to decide.
local function request_common(job, lanes, seq, channel, member, payload, manual, lane, prefix)
  local f = call_checked('hash', 'HMGET', job, 'state', 'job_id', 'followup_manual', 'lane',
    'followup_lane')
  if f[1] == 'waiting' then
    if not manual and (lane_of(lane) ~= URGENT or lane_of(f[4]) == URGENT)
        and call_checked('zset', 'ZSCORE', (lane_set(lanes, f[4])), member) then
      return {'coalesced', f[2] or '0'}
    end
    return nil, f
  end
  if f[1] == 'running' then
    return nil, f
  end
  return {'added', add_requested_job(job, lanes, seq, channel, member, payload, lane, prefix)}
end

-- The requests request_common leaves, given the job record's fields `f`
-- it read (a job waiting or running). See request_job.
local function request_rest(f, job, lanes, running, channel, member, payload, followup, manual, lane, prefix)
  lane = lane_of(lane)
  if f[1] == 'waiting' then
    local set, other = lane_set(lanes, f[4])
    if not call_checked('zset', 'ZSCORE', set, member) then
      expect_types(other, 'zset')
      repair_job(job, lanes, running, channel, member, now_ms(), prefix)
    end
    -- The job reads current data when it starts: nothing to add. A manual
    -- request upgrades it, so its instructions are not lost. An urgent
    -- request moves a job of the normal lane to the urgent one, with its
    -- trigger; a job there already keeps its own (a manual job's
    -- instructions are not lost to a reactive request).
    local upgrade = lane == URGENT and lane_of(f[4]) ~= URGENT
    if upgrade then
      expect_types(lanes.urgent, 'zset')
    end
    if manual or upgrade then
      redis.call('HSET', job, 'payload', payload)
    end
    if upgrade then
      make_urgent(job, lanes, member)
    end
    return {'coalesced', f[2] or '0'}
  end
  if not call_checked('zset', 'ZSCORE', running, member) then
    repair_job(job, lanes, running, channel, member, now_ms(), prefix)
  end
  -- Remember exactly one follow-up; a manual one wins over an automatic
  -- one. It runs in the most urgent lane of the requests made meanwhile.
  if manual or f[3] ~= '1' then
    redis.call('HSET', job, 'followup', followup, 'followup_manual', manual and '1' or '0',
      'followup_lane', max_lane(lane, f[5]))
  end
  return {'followup', f[2] or '0'}
end

-- Requests a job for `member` (job record `job`), deciding by the state of
-- its current job what that means: joins a waiting job (a manual request
-- replaces its payload, an urgent one moves it to the urgent lane), records
-- one follow-up of a running one (`followup`, the payload; a manual one
-- wins), or adds a new job (`payload`) in `lane`. A record whose set lost
-- its entry is put back there first (see repair_job): the request joins a
-- job that will run. A job waiting paused (its queue or domain is; `prefix`
-- is the queue's key prefix, where the parked sets are) coalesces requests
-- like any waiting job; an urgent request moves it to the urgent lane all
-- the same (a parked job's record carries its lane back when its domain
-- resumes). A key of the wrong type is refused before anything is
-- written; each path checks the keys it touches. The one place a request
-- is decided, in two halves (request_common, then request_rest) that
-- enqueue calls apart: enqueue and the dead-letter retry call it. Returns
-- {outcome, job_id}; outcome is added | coalesced | followup.
local function request_job(job, lanes, running, seq, channel, member, payload, followup, manual, lane, prefix)
  local reply, f = request_common(job, lanes, seq, channel, member, payload, manual, lane, prefix)
  if reply then
    return reply
  end
  return request_rest(f, job, lanes, running, channel, member, payload, followup, manual, lane,
    prefix)
end
