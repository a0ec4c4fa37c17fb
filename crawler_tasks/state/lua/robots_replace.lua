-- robots_replace: an origin's robots.txt state replaces what was kept, with a TTL.
-- KEYS[1] the origin's robots HASH (Keys.robots)
-- ARGV[1] TTL (s)
-- ARGV[2..] field, value pairs
-- Returns nothing.
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], unpack(ARGV, 2))
redis.call('EXPIRE', KEYS[1], ARGV[1])
