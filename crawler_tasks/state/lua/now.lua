-- Fragment: `now`, Redis' clock in seconds (every node of a crawl reads the same clock).
-- Needs no KEYS or ARGV; defines the locals `t` and `now`.
local t = redis.call('TIME'); local now = t[1] + t[2] / 1e6
