-- feed_lock_renew: restart the TTL of a feed's lock while it is still ours.
-- KEYS[1] the lock, STRING (Keys.feed_lock)
-- ARGV[1] our token (random)
-- ARGV[2] TTL (ms)
-- Returns 1 when renewed, 0 when the lock expired and is no longer ours.
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0
