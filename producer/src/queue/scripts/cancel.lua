-- Cancels a job by id, for an operator: a waiting job leaves its lane; a
-- running job's lease is revoked (its worker's next renewal is refused and
-- the attempt is cancelled; its settle, fail or release finds the lease
-- lost and changes nothing). Then the job is dead-lettered with reason
-- `cancelled` (a dead letter like any other: listed, retried, purged), or
-- requeued at its original place in line, as the operator chose. A
-- dead-lettered running job still gets the follow-up requested while it
-- ran; a requeued one folds it in (as a hand-back does).
--   KEYS: 1 job id index, 2 running zset, 3 waiting zset, 4 urgent zset,
--         5 dead zset, 6 seq counter, 7 done zset
--   ARGV: 1 key prefix, 2 job id, 3 then: 'dead' or 'requeue', 4 dead max
--         count, 5 dead max age (ms), 6 wake channel, 7 how long the mark
--         of a revoked lease is kept (ms)
-- Returns {'cancelled', member, state it was in, revoked lease token or
-- '', follow-up job id or ''}, {'not_found'} or {'finished', 'done' |
-- 'dead'} (the job ended before; nothing changed).
expect_types(KEYS[1], 'hash', KEYS[2], 'zset', KEYS[3], 'zset', KEYS[4], 'zset',
  KEYS[5], 'zset', KEYS[7], 'zset')
expect_counter(KEYS[6])
local prefix, job_id = ARGV[1], ARGV[2]
local member = redis.call('HGET', KEYS[1], job_id)
if not member then
  return {'not_found'}
end
local job = job_key(prefix, member)
expect_types(job, 'hash')
local f = redis.call('HMGET', job, 'state', 'job_id', 'lease', 'followup', 'followup_manual',
  'followup_lane')
local entry = set_entry(member, job_id)
if f[2] ~= job_id or (f[1] ~= 'waiting' and f[1] ~= 'running') then
  if redis.call('ZSCORE', KEYS[5], entry) then
    return {'finished', 'dead'}
  end
  if redis.call('ZSCORE', KEYS[7], entry) or f[2] == job_id then
    return {'finished', f[1] == 'dead' and 'dead' or 'done'}
  end
  return {'not_found'}
end
-- The keys this cancel writes beyond the ones checked above: the mark of
-- a revoked lease, and the dead letter's record.
if f[1] == 'running' and f[3] then
  expect_types(revoked_lease_key(prefix, f[3]), 'string')
end
if ARGV[3] ~= 'requeue' then
  expect_types(dead_record_key(prefix, entry), 'hash')
end
local lanes = lanes_of(KEYS[3], KEYS[4])
local now = now_ms()
local was, token = f[1], ''
if was == 'running' then
  token = f[3] or ''
  redis.call('ZREM', KEYS[2], member)
  -- The revocation: no lease token matches a record without one. The
  -- mark tells an attempt that has not taken its entity lease yet.
  redis.call('HDEL', job, 'lease')
  if token ~= '' then
    redis.call('SET', revoked_lease_key(prefix, token), now, 'PX', ARGV[7])
  end
else
  redis.call('ZREM', KEYS[3], member)
  redis.call('ZREM', KEYS[4], member)
end
local followup = ''
if ARGV[3] == 'requeue' then
  if was == 'running' then
    if f[5] == '1' then
      redis.call('HSET', job, 'payload', f[4])
    end
    if lane_of(f[6]) == URGENT then
      redis.call('HSET', job, 'lane', URGENT)
    end
    redis.call('HDEL', job, 'followup', 'followup_manual', 'followup_lane')
    -- The cancelled attempt is not the job's failure: it is given back.
    bump(job, 'attempts', -1)
    announce_settled(prefix, member, 'retry')
  end
  requeue(job, lanes, ARGV[6], member, job_id, now)
  return {'cancelled', member, was, token, followup}
end
dead_letter(job, KEYS[5], prefix, member, 'cancelled', now, ARGV[4], ARGV[5])
redis.call('HSET', job, 'last_error', 'cancelled')
local id = end_run(job, lanes, KEYS[6], ARGV[6], member, (was == 'running') and f[4],
  f[6], now, 'dead', ARGV[5])
if id then
  followup = tostring(id)
end
announce_settled(prefix, member, 'dead')
return {'cancelled', member, was, token, followup}
