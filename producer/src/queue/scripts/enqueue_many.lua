-- Requests compactions of many entities in one call, each decided as
-- enqueue decides it (request_job in the prelude), in order: a later
-- request of an entity meets the job an earlier one added. One function
-- call per batch instead of one per request: the call's own work (its
-- parsing, its reply, the lanes) is paid once.
--   KEYS: 1 waiting zset, 2 seq counter, 3 running zset, 4 urgent zset
--   ARGV: 1 wake channel, 2 key prefix, then five per request: member,
--         payload of a new job, payload of a follow-up, "1" when manual,
--         its lane
-- Returns one {outcome, job_id} per request, as enqueue does. A request
-- refused (a key of the wrong type) ends the call with its error, before
-- it wrote anything; the requests before it stand, each decided whole.
local lanes = lanes_of(KEYS[1], KEYS[4])
local replies = {}
for i = 3, #ARGV, 5 do
  local member = ARGV[i]
  replies[#replies + 1] = request_job(job_key(ARGV[2], member), lanes, KEYS[3], KEYS[2], ARGV[1],
    member, ARGV[i + 1], ARGV[i + 2], ARGV[i + 3] == '1', ARGV[i + 4], ARGV[2])
end
return replies
