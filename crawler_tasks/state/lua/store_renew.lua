-- renew: extend a worker's lease on what it took (a sign of life); a lease that is gone
-- (ran out, and its batch given back) is not made again.
-- KEYS[1] the leases ZSET, consumer -> lease expiry (Keys.store_leases)
-- ARGV[1] lease seconds
-- ARGV[2] consumer (the worker's id)
-- Returns ZADD's answer, 0 (with XX it adds no member; the caller ignores it).
-- include: now.lua
return redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[1]), ARGV[2])
