-- Requests a compaction of one entity, atomically deciding what that means
-- (request_job in the prelude, which refuses a key of the wrong type
-- before anything is written): its two halves apart, so the common
-- requests are decided before the definitions only the rest uses are made
-- (the `-- @prelude` line; see `with_prelude` in scripts.rs).
--   KEYS: 1 job hash, 2 waiting zset, 3 seq counter, 4 running zset,
--         5 urgent zset
--   ARGV: 1 member, 2 payload of a new job, 3 payload of a follow-up,
--         4 "1" when the request is manual, 5 its lane ('urgent' for
--         manual and reactive requests, else 'normal'), 6 wake channel,
--         7 key prefix
-- Returns {outcome, job_id}; outcome is added | coalesced | followup.
local lanes, manual = lanes_of(KEYS[2], KEYS[5]), ARGV[4] == '1'
local reply, f = request_common(KEYS[1], lanes, KEYS[3], ARGV[6], ARGV[1], ARGV[2], manual,
  ARGV[5], ARGV[7])
if reply then
  return reply
end
-- @prelude
return request_rest(f, KEYS[1], lanes, KEYS[4], ARGV[6], ARGV[1], ARGV[2], ARGV[3], manual,
  ARGV[5], ARGV[7])
