-- Ends a failed attempt: either schedules a retry or dead-letters the job.
-- A dead-lettered job still gets its recorded follow-up (the run ended).
--   KEYS: 1 job hash, 2 running zset, 3 waiting zset, 4 dead zset,
--         5 seq counter, 6 urgent zset
--   ARGV: 1 member, 2 lease token, 3 retry delay ms (-1: dead-letter now),
--         4 reason, 5 dead max count, 6 dead max age (ms), 7 wake channel,
--         8 key prefix, 9 "0" when the attempt is not counted (postponed:
--         a service the job needs was unavailable, the job did not fail)
-- A retry waits in the job's lane, its delay kept there too.
-- Returns {'retry'}, {'dead'}, {'dead_followup', new job_id} or {'lost'}.
-- A key of the wrong type is refused before anything is written, with
-- only the checks the path taken needs: the record by its read, the lane
-- a retry goes back to by one TYPE (it is written after the running set),
-- the running set by the ZREM that is the first write. The dead-letter
-- set and the dead letter's record are checked only when the job is
-- dead-lettered, the counter and the lanes only when that adds a follow-up.
local lanes = lanes_of(KEYS[3], KEYS[6])
local f = call_checked('hash', 'HMGET', KEYS[1], 'state', 'lease', 'job_id', 'followup', 'lane',
  'followup_lane')
if f[1] ~= 'running' or f[2] ~= ARGV[2] then
  return {'lost'}
end
local delay = tonumber(ARGV[3])
local retry_lane = nil
if delay >= 0 then
  retry_lane = lane_set(lanes, f[5])
  expect_types(retry_lane, 'zset')
else
  expect_types(KEYS[4], 'zset', dead_record_key(ARGV[8], set_entry(ARGV[1], f[3] or '0')), 'hash')
  if f[4] then
    expect_counter(KEYS[5])
    expect_types(lanes.normal, 'zset', lanes.urgent, 'zset')
  end
end
local now = now_ms()
call_checked('zset', 'ZREM', KEYS[2], ARGV[1])
if retry_lane then
  redis.call('HSET', KEYS[1], 'state', 'waiting', 'last_error', ARGV[4])
  redis.call('HDEL', KEYS[1], 'lease', 'deadline', 'worker')
  if ARGV[9] == '0' then
    bump(KEYS[1], 'attempts', -1)
  end
  redis.call('ZADD', retry_lane, waiting_score(now + delay, f[3]), ARGV[1])
  -- Idle workers re-read when the retry is due.
  redis.call('PUBLISH', ARGV[7], f[3])
  announce_settled(ARGV[8], ARGV[1], 'retry')
  return {'retry'}
end
announce_settled(ARGV[8], ARGV[1], 'dead')
dead_letter(KEYS[1], KEYS[4], ARGV[8], ARGV[1], ARGV[4], now, ARGV[5], ARGV[6])
redis.call('HSET', KEYS[1], 'last_error', ARGV[4])
local id = end_run(KEYS[1], lanes, KEYS[5], ARGV[7], ARGV[1], f[4], f[6], now, 'dead', ARGV[6])
if id then
  return {'dead_followup', tostring(id)}
end
return {'dead'}
