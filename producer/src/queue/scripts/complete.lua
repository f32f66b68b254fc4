-- Finishes a running job. If compaction was requested while it ran, exactly
-- one follow-up job is added in the same step.
--   KEYS: 1 job hash, 2 running zset, 3 waiting zset, 4 signal list,
--         5 done zset, 6 seq counter
--   ARGV: 1 member, 2 lease token, 3 done max count, 4 done max age (ms),
--         5 signal list cap
-- Returns {'done'}, {'followup', new job_id} or {'lost'} when the caller no
-- longer holds the lease (nothing is changed then).
if not holds_lease(KEYS[1], ARGV[2]) then
  return {'lost'}
end
return complete_run(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], ARGV[1], now_ms(),
  ARGV[3], ARGV[4], ARGV[5])
