-- The operator's view of jobs: a page of one state's jobs, or one job by
-- id. Reads only. A page is a range of one sorted set (two for the lanes
-- of waiting jobs) after a cursor: a position (score and member), not an
-- offset, so jobs that come and go ahead of it neither shift nor repeat
-- the pages after it, and a deep page costs what the first one does.
--   KEYS: 1 urgent zset, 2 waiting zset, 3 running zset, 4 done zset,
--         5 dead zset, 6 job id index
--   ARGV: 1 key prefix, 2 op: 'list' or 'get'
--     list: 3 state (waiting | delayed | running | done | dead), 4 limit,
--           5 cursor ('' for the first page: '<set>:<score>:<member>')
--     get:  3 job id
-- Returns {now, next cursor or '', jobs}, each job a flat list of field,
-- value pairs: the job record's fields plus `view` (the state shown),
-- `member`, `job_id` and `score` (its score in the set it is listed in).
local now = now_ms()
local prefix = ARGV[1]
local sets = {u = KEYS[1], n = KEYS[2], r = KEYS[3], c = KEYS[4], d = KEYS[5]}
-- Waiting jobs whose time has come sort at or below this score.
local due = now * SCORE_SCALE + SCORE_SCALE - 1

local RECORD_FIELDS = {'state', 'job_id', 'payload', 'attempts', 'stalls', 'enqueued_at',
  'started_at', 'finished_at', 'worker', 'deadline', 'lane', 'last_error', 'followup'}

-- The fields of the record `key` (a hash, else nothing), as pairs.
local function record_of(key, fields)
  local out = {}
  if redis.call('TYPE', key)['ok'] ~= 'hash' then
    return out
  end
  local values = redis.call('HMGET', key, unpack(fields))
  for i, f in ipairs(fields) do
    if values[i] then
      out[#out + 1] = f
      out[#out + 1] = values[i]
    end
  end
  return out
end

-- The job an entry of set `set` names, as pairs, or nil when its record
-- is gone (a waiting or running job) — a done job keeps its entry, the
-- record may have been replaced by a newer job of its entity.
local function describe(set, entry, score)
  local member, job_id, record = entry, nil, nil
  if set == 'c' or set == 'd' then
    member, job_id = string.match(entry, '^(.*)|(%d+)$')
    if not member then
      return nil
    end
  end
  if set == 'd' then
    record = record_of(dead_record_key(prefix, entry),
      {'payload', 'attempts', 'stalls', 'reason', 'failed_at'})
    if #record == 0 then
      return nil
    end
    record[#record + 1] = 'last_error'
    record[#record + 1] = redis.call('HGET', dead_record_key(prefix, entry), 'reason') or ''
    record[#record + 1] = 'state'
    record[#record + 1] = 'dead'
  else
    record = record_of(job_key(prefix, member), RECORD_FIELDS)
    local f = {}
    for i = 1, #record, 2 do
      f[record[i]] = record[i + 1]
    end
    if set == 'c' then
      -- Only the record of this very job says more than its entry.
      if f.job_id ~= job_id or f.state ~= 'done' then
        record = {'state', 'done'}
      end
    elseif #record == 0 then
      return nil
    else
      job_id = f.job_id
    end
  end
  local view = ({u = 'waiting', n = 'waiting', r = 'running', c = 'done', d = 'dead'})[set]
  if view == 'waiting' and tonumber(score) > due then
    view = 'delayed'
  end
  record[#record + 1] = 'view'
  record[#record + 1] = view
  record[#record + 1] = 'member'
  record[#record + 1] = member
  record[#record + 1] = 'job_id'
  record[#record + 1] = job_id or ''
  record[#record + 1] = 'score'
  record[#record + 1] = score
  return record
end

-- Whether `a` sorts before `b` byte by byte, as Redis orders the members
-- of one score (Lua's `<` follows the server's locale).
local function bytes_before(a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then
      return x < y
    end
  end
  return #a < #b
end

-- Up to `limit` entries of `set` within [lo, hi] (newest first when
-- `rev`), after the position (cscore, cmember) when given: {member, score}
-- pairs. Entries of one score sort by member, so those tied with the
-- cursor are read apart and only the ones past it kept.
local function range(key, lo, hi, rev, cscore, cmember, limit)
  local out = {}
  local function take(reply)
    for i = 1, #reply, 2 do
      if #out >= limit then
        return
      end
      out[#out + 1] = {reply[i], reply[i + 1]}
    end
  end
  local from = rev and hi or lo
  if cscore then
    local ties = call_checked('zset', 'ZRANGEBYSCORE', key, cscore, cscore, 'WITHSCORES')
    local after = {}
    if rev then
      for i = #ties - 1, 1, -2 do
        if bytes_before(ties[i], cmember) then
          after[#after + 1] = ties[i]
          after[#after + 1] = ties[i + 1]
        end
      end
    else
      for i = 1, #ties, 2 do
        if bytes_before(cmember, ties[i]) then
          after[#after + 1] = ties[i]
          after[#after + 1] = ties[i + 1]
        end
      end
    end
    take(after)
    from = '(' .. cscore
  end
  if #out < limit then
    if rev then
      take(call_checked('zset', 'ZREVRANGEBYSCORE', key, from, lo, 'WITHSCORES', 'LIMIT', 0,
        limit - #out))
    else
      take(call_checked('zset', 'ZRANGEBYSCORE', key, from, hi, 'WITHSCORES', 'LIMIT', 0,
        limit - #out))
    end
  end
  return out
end

local function list(state, limit, cursor)
  -- The sets a state is read from, in order, with the bounds and the
  -- direction of each.
  local plan
  if state == 'waiting' then
    plan = {{'u', '-inf', due, false}, {'n', '-inf', due, false}}
  elseif state == 'delayed' then
    plan = {{'u', '(' .. due, '+inf', false}, {'n', '(' .. due, '+inf', false}}
  elseif state == 'running' then
    plan = {{'r', '-inf', '+inf', false}}
  elseif state == 'done' then
    plan = {{'c', '-inf', '+inf', true}}
  elseif state == 'dead' then
    plan = {{'d', '-inf', '+inf', true}}
  else
    return redis.error_reply('ERR unknown job state ' .. tostring(state))
  end
  local cset, cscore, cmember
  if cursor ~= '' then
    cset, cscore, cmember = string.match(cursor, '^(%a):([^:]+):(.+)$')
    if not cset or not tonumber(cscore) then
      return redis.error_reply('ERR malformed cursor')
    end
  end
  local jobs, last = {}, nil
  local started = cset == nil
  for _, step in ipairs(plan) do
    local set, lo, hi, rev = step[1], step[2], step[3], step[4]
    if not started and set == cset then
      started = true
    elseif not started then
      set = nil
    else
      cscore, cmember = nil, nil
    end
    if set and #jobs < limit then
      -- Entries whose record is gone are skipped, so a page may need
      -- more than one read; each read moves the cursor on.
      while #jobs < limit do
        local want = limit - #jobs
        local entries = range(sets[set], lo, hi, rev, cscore, cmember, want)
        for _, e in ipairs(entries) do
          local job = describe(set, e[1], e[2])
          if job then
            jobs[#jobs + 1] = job
          end
          last = set .. ':' .. e[2] .. ':' .. e[1]
          cscore, cmember = e[2], e[1]
        end
        if #entries < want then
          break
        end
      end
    end
  end
  local next_cursor = ''
  if #jobs >= limit and last then
    next_cursor = last
  end
  return {now, next_cursor, jobs}
end

local function get(job_id)
  -- An index of another type is refused by name: jobs added while it was
  -- there could not be indexed (see write_job), so "no such job" would
  -- be a wrong answer.
  local member = call_checked('hash', 'HGET', KEYS[6], job_id)
  if not member then
    return {now, '', {}}
  end
  local f = job_fields(job_key(prefix, member), 'state', 'job_id', 'lane')
  if f[2] == job_id then
    if f[1] == 'waiting' then
      local set = lane_of(f[3]) == URGENT and 'u' or 'n'
      local score = call_checked('zset', 'ZSCORE', sets[set], member)
      if score then
        return {now, '', {describe(set, member, score)}}
      end
      -- A job of a paused domain that a claim met waits in its domain's
      -- parked set (scored as in its lane), still a waiting job.
      local domain = domain_of(member)
      if domain then
        score = read_or_nil('ZSCORE', parked_key(prefix, domain), member)
        if score then
          return {now, '', {describe(set, member, score)}}
        end
      end
    elseif f[1] == 'running' then
      local score = call_checked('zset', 'ZSCORE', sets.r, member) or '0'
      return {now, '', {describe('r', member, score)}}
    end
  end
  local entry = set_entry(member, job_id)
  for _, set in ipairs({'d', 'c'}) do
    local score = call_checked('zset', 'ZSCORE', sets[set], entry)
    if score then
      local job = describe(set, entry, score)
      if job then
        return {now, '', {job}}
      end
    end
  end
  return {now, '', {}}
end

if ARGV[2] == 'list' then
  return list(ARGV[3], tonumber(ARGV[4]), ARGV[5])
end
return get(ARGV[3])
