-- delay: put store entries back to be taken again some seconds from now (Redis clock).
-- KEYS[1] the delayed ZSET, entry -> when (Keys.store_delayed)
-- ARGV (seconds from now, entry) pairs
-- Returns how many entries were given.
-- include: now.lua
for i = 1, #ARGV, 2 do redis.call('ZADD', KEYS[1], now + tonumber(ARGV[i]), ARGV[i + 1]) end
return #ARGV / 2
