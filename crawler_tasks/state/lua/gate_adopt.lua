-- adopt: a fetch another app sent straight to crawl.fetch joins its crawl's outstanding set
-- once (a mark with a TTL keeps a late duplicate of it from being adopted twice).
-- KEYS[1] the crawl's outstanding SET (Keys.outstanding)
-- KEYS[2] the task's adoption mark (Keys.adopted)
-- KEYS[3] the crawl's stats HASH (Keys.stats)
-- ARGV[1] task id
-- ARGV[2] TTL of the mark (s)
-- Returns 1 (tracked already), 2 (adopted now) or 0 (adopted before and done: a late
-- duplicate).
if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 1 then return 1 end
if not redis.call('SET', KEYS[2], '1', 'NX', 'EX', ARGV[2]) then return 0 end
redis.call('SADD', KEYS[1], ARGV[1])
redis.call('HINCRBY', KEYS[3], 'fetch/direct', 1)
return 2
