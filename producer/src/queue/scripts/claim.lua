-- Takes the oldest job that may run now and gives it a lease.
--   KEYS: 1 waiting zset, 2 running zset
--   ARGV: 1 lease ttl (ms), 2 worker id, 3 key prefix, 4 nonce
-- Returns {'claimed', member, payload, job_id, attempt, lease token,
-- enqueued_at, ms since enqueued_at} or {'empty', ms until the next delayed
-- job is due, or ''} (server clock: callers need not share it).
-- A member whose job record is gone (data loss) is dropped and reported as
-- {'orphan', member} so the caller can count it and claim again.
return claim_next(KEYS[1], KEYS[2], ARGV[3], ARGV[1], ARGV[2], ARGV[4], now_ms())
