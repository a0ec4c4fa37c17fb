-- feed_lock_release: drop a feed's lock if it is still ours.
-- KEYS[1] the lock, STRING (Keys.feed_lock)
-- ARGV[1] our token (random)
-- Returns 1 when released, 0 when it was no longer ours.
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0
