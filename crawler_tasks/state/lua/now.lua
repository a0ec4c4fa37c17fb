-- Fragment: `now`, Redis' clock in seconds (every node of a crawl reads the same clock).
-- Needs no KEYS or ARGV; defines the locals `t` and `now`, and `kept_time(x)`: the time `x` as
-- kept in a hash, to the microsecond (Lua's tostring keeps 14 digits, a tenth of a
-- millisecond: a time rounded up would be later than the next script's `now`).
local t = redis.call('TIME'); local now = t[1] + t[2] / 1e6
local function kept_time(x) return string.format('%.6f', x) end
