-- begin (a gate of several shards): the first call of a task's completion, on its own shard.
-- A late duplicate of a finished task is refused ('stale'); a task whose completion began
-- before gets 'replay' (its shards' parts answer as they did: gate_part.lua); otherwise the
-- task's counters are applied, its completion is marked begun, and 'ok'.
-- KEYS[1] the task's shard's outstanding SET (Keys.outstanding)
-- KEYS[2] the task's replay HASH (Keys.replay)
-- KEYS[3] the task's shard's stats HASH (Keys.stats)
-- ARGV[1] task id
-- ARGV[2] replay TTL (s)
-- ARGV[3..] (counter name, amount) pairs
-- Returns 'stale', 'replay' or 'ok'.
if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 0 then return 'stale' end
if redis.call('HEXISTS', KEYS[2], '~') == 1 then return 'replay' end
for i = 3, #ARGV, 2 do redis.call('HINCRBY', KEYS[3], ARGV[i], ARGV[i + 1]) end
redis.call('HSET', KEYS[2], '~', '1')
redis.call('EXPIRE', KEYS[2], ARGV[2])
return 'ok'
