-- Puts jobs back in the set their record's state says they are in, when
-- the set lost their entry (see repair_job in the prelude), either for the
-- members given, or for the next stretch of a walk over every job record
-- of the queue: SCAN from the cursor kept in KEYS[3], a bounded step per
-- call, so a sweep finds such records even when no request names them.
--   KEYS: 1 waiting zset, 2 running zset, 3 repair cursor (string),
--         4 urgent zset
--   ARGV: 1 key prefix, 2 wake channel, 3 'members' or 'scan',
--         then the members, or for 'scan' how many keys one step looks at
-- Returns {requeued, relisted, 1 when a walk ended (the cursor wrapped)}.
expect_types(KEYS[1], 'zset', KEYS[2], 'zset', KEYS[3], 'string', KEYS[4], 'zset')
local lanes = lanes_of(KEYS[1], KEYS[4])
local now = now_ms()
local members, wrapped = {}, 0
local scan_cursor
if ARGV[3] == 'scan' then
  local cursor = redis.call('GET', KEYS[3]) or '0'
  if not string.match(cursor, '^%d+$') then
    cursor = '0'
  end
  local reply = redis.call('SCAN', cursor, 'MATCH', job_key(ARGV[1], '*'), 'COUNT', tonumber(ARGV[4]))
  scan_cursor = reply[1]
  for _, key in ipairs(reply[2]) do
    members[#members + 1] = member_of_job_key(ARGV[1], key)
  end
else
  for i = 4, #ARGV do
    members[#members + 1] = ARGV[i]
  end
end
local requeued, relisted = 0, 0
for _, member in ipairs(members) do
  local done = repair_job(job_key(ARGV[1], member), lanes, KEYS[2], ARGV[2], member, now, ARGV[1])
  if done == 'requeued' then
    requeued = requeued + 1
  elseif done == 'relisted' then
    relisted = relisted + 1
  end
end
if scan_cursor then
  if scan_cursor == '0' then
    wrapped = 1
    redis.call('DEL', KEYS[3])
  else
    redis.call('SET', KEYS[3], scan_cursor)
  end
end
return {requeued, relisted, wrapped}
