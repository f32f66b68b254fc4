-- Acknowledges finished jobs and claims new ones in one step: a busy
-- worker settles every job that finished since its last call and fills the
-- slots they freed, in one round trip. Also serves a plain claim (nothing
-- finished) and a plain completion (nothing wanted).
--   KEYS: 1 running zset, 2 waiting zset, 3 done zset, 4 seq counter,
--         5 urgent zset
--   ARGV: 1 key prefix, 2 wake channel, 3 done max count, 4 done max age
--         (ms), 5 lease ttl (ms), 6 worker id, 7 nonce, 8 jobs wanted,
--         9 number of finished jobs n, then n pairs: member, lease token
-- Returns {completions, claims, next_due}: one completion per finished job
-- ({'done'}, {'followup', new job_id} or {'lost'}: the lease was lost and
-- nothing changed), then what claim_some returns (see the prelude).
local members, tokens = {}, {}
for i = 1, tonumber(ARGV[9]) do
  members[i] = ARGV[8 + 2 * i]
  tokens[i] = ARGV[9 + 2 * i]
end
-- Every key this call may write is refused, when of the wrong type,
-- before the first write: the checks are folded into the reads and first
-- writes each part makes anyway (see complete_jobs and claim_some).
local lanes = lanes_of(KEYS[2], KEYS[5])
local now = now_ms()
local completions, size = complete_jobs(ARGV[1], KEYS[1], lanes, KEYS[3], KEYS[4], ARGV[2],
  members, tokens, now, ARGV[4])
if size then
  trim_done(ARGV[1], KEYS[3], now, ARGV[3], ARGV[4], size)
end
local claims = {{}, ''}
local wanted = tonumber(ARGV[8])
if wanted > 0 then
  claims = claim_some(lanes, KEYS[1], ARGV[1], ARGV[5], ARGV[6], ARGV[7], now, wanted, size == nil)
end
return {completions, claims[1], claims[2]}
