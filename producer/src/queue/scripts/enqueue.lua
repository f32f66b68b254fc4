-- Requests a compaction of one entity, atomically deciding what that means
-- (request_job in the prelude).
--   KEYS: 1 job hash, 2 waiting zset, 3 seq counter, 4 running zset,
--         5 urgent zset
--   ARGV: 1 member, 2 payload of a new job, 3 payload of a follow-up,
--         4 "1" when the request is manual, 5 wake channel, 6 its lane
--         ('urgent' for manual and reactive requests, else 'normal'),
--         7 key prefix
-- Returns {outcome, job_id}; outcome is added | coalesced | followup.
expect_types(KEYS[1], 'hash', KEYS[2], 'zset', KEYS[4], 'zset', KEYS[5], 'zset')
expect_counter(KEYS[3])
return request_job(KEYS[1], lanes_of(KEYS[2], KEYS[5]), KEYS[4], KEYS[3], ARGV[5], ARGV[1],
  ARGV[2], ARGV[3], ARGV[4] == '1', ARGV[6], ARGV[7])
