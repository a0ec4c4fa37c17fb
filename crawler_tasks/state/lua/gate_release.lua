-- release (a gate of several shards): task ids leave one shard's outstanding set; with
-- ARGV[1] = '1' those that were still there are counted as gate/released.
-- KEYS[1] the shard's outstanding SET (Keys.outstanding)
-- KEYS[2] the shard's stats HASH (Keys.stats)
-- ARGV[1] '1' to count, '0' not
-- ARGV[2..] task ids
-- Returns how many left.
local released = 0
for i = 2, #ARGV do released = released + redis.call('SREM', KEYS[1], ARGV[i]) end
if released > 0 and ARGV[1] == '1' then redis.call('HINCRBY', KEYS[2], 'gate/released', released) end
return released
