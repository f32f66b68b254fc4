-- Requests a compaction of one entity, atomically deciding what that means.
--   KEYS: 1 job hash, 2 waiting zset, 3 seq counter, 4 running zset,
--         5 urgent zset
--   ARGV: 1 member, 2 payload of a new job, 3 payload of a follow-up,
--         4 "1" when the request is manual, 5 wake channel, 6 its lane
--         ('urgent' for manual and reactive requests, else 'normal'),
--         7 key prefix
-- Returns {outcome, job_id}; outcome is added | coalesced | followup.
-- A job record in a state whose set has lost its entry is put back there
-- (see repair_job): the request joins a job that will run. A job waiting
-- paused (its queue or domain is) coalesces requests like any waiting job;
-- an urgent request moves it to the urgent lane all the same (a parked
-- job's record carries its lane back when its domain resumes).
expect_types(KEYS[1], 'hash', KEYS[2], 'zset', KEYS[4], 'zset', KEYS[5], 'zset')
expect_counter(KEYS[3])
local lanes = lanes_of(KEYS[2], KEYS[5])
local f = redis.call('HMGET', KEYS[1], 'state', 'job_id', 'followup_manual', 'lane', 'followup_lane')
local manual = ARGV[4] == '1'
local lane = lane_of(ARGV[6])
if f[1] == 'waiting' then
  repair_job(KEYS[1], lanes, KEYS[4], ARGV[5], ARGV[1], now_ms(), ARGV[7])
  -- The job reads current data when it starts: nothing to add. A manual
  -- request upgrades it, so its instructions are not lost. An urgent
  -- request moves a job of the normal lane to the urgent one, with its
  -- trigger; a job there already keeps its own (a manual job's
  -- instructions are not lost to a reactive request).
  local upgrade = lane == URGENT and lane_of(f[4]) ~= URGENT
  if manual or upgrade then
    redis.call('HSET', KEYS[1], 'payload', ARGV[2])
  end
  if upgrade then
    make_urgent(KEYS[1], lanes, ARGV[1])
  end
  return {'coalesced', f[2] or '0'}
end
if f[1] == 'running' then
  repair_job(KEYS[1], lanes, KEYS[4], ARGV[5], ARGV[1], now_ms(), ARGV[7])
  -- Remember exactly one follow-up; a manual one wins over an automatic
  -- one. It runs in the most urgent lane of the requests made meanwhile.
  if manual or f[3] ~= '1' then
    redis.call('HSET', KEYS[1], 'followup', ARGV[3], 'followup_manual', manual and '1' or '0',
      'followup_lane', max_lane(lane, f[5]))
  end
  return {'followup', f[2] or '0'}
end
local id = add_job(KEYS[1], lanes, KEYS[3], ARGV[5], ARGV[1], ARGV[2], lane, now_ms())
return {'added', tostring(id)}
