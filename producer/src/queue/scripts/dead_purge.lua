-- Deletes a batch of dead letters, index entries and records together,
-- and their ids from the job id index.
--   KEYS: 1 dead zset
--   ARGV: 1 key prefix, then the entries
-- Returns how many entries the set held.
expect_types(KEYS[1], 'zset')
local removed = 0
for i = 2, #ARGV do
  removed = removed + redis.call('ZREM', KEYS[1], ARGV[i])
  redis.call('DEL', dead_record_key(ARGV[1], ARGV[i]))
end
unindex_entries(ARGV[1], {unpack(ARGV, 2)})
return removed
