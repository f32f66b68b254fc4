-- complete.lua followed by claim.lua in one round trip: a busy worker
-- acknowledges a job and takes the next one at once.
--   KEYS: 1 job hash, 2 running zset, 3 waiting zset, 4 signal list,
--         5 done zset, 6 seq counter
--   ARGV: 1 member, 2 lease token, 3 done max count, 4 done max age (ms),
--         5 signal list cap, 6 lease ttl (ms), 7 worker id, 8 key prefix,
--         9 nonce
-- Returns {completion, claim}: the replies of complete.lua and claim.lua.
-- When the lease was lost, nothing is completed and nothing is claimed.
if not holds_lease(KEYS[1], ARGV[2]) then
  return {{'lost'}, {'empty', ''}}
end
local now = now_ms()
local completion = complete_run(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], ARGV[1], now,
  ARGV[3], ARGV[4], ARGV[5])
return {completion, claim_next(KEYS[3], KEYS[2], ARGV[8], ARGV[6], ARGV[7], ARGV[9], now)}
