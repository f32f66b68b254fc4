-- Where an entity's requested compaction stands, for a chat request that
-- waits on it: one read of the job record, its place in its lane's set,
-- and how many workers are live, all by the server clock.
--   KEYS: 1 job hash, 2 waiting zset, 3 workers zset, 4 urgent zset,
--         5 pause hash
--   ARGV: 1 member
-- Returns {state, job_id, attempts, ms until it may run (-1: not waiting),
-- ms until its lease ends (-1: not running), live workers, paused (1: the
-- job waits and the queue or its domain is paused, else 0)}; state is ''
-- when the entity has no job record.
local now = now_ms()
local f = call_checked('hash', 'HMGET', KEYS[1], 'state', 'job_id', 'attempts', 'deadline', 'lane')
local due_in, lease_left, paused = -1, -1, 0
if f[1] == 'waiting' then
  local lane = lane_set(lanes_of(KEYS[2], KEYS[4]), f[5])
  local score = call_checked('zset', 'ZSCORE', lane, ARGV[1])
  if score then
    due_in = math.max(math.floor(tonumber(score) / SCORE_SCALE) - now, 0)
  end
  local held = read_or_nil('HMGET', KEYS[5], PAUSED_QUEUE, paused_field(domain_of(ARGV[1]) or ''))
  if held and (held[1] or held[2]) then
    paused = 1
  end
elseif f[1] == 'running' and f[4] then
  lease_left = math.max(tonumber(f[4]) - now, 0)
end
local live = call_checked('zset', 'ZCOUNT', KEYS[3], '(' .. now, '+inf')
return {f[1] or '', f[2] or '', f[3] or '', due_in, lease_left, live, paused}
