-- take: the URLs of one crawl's revisit schedule that are due, at most a batch, each
-- leased (due again after the lease) until its fetch schedules it anew; so a tick whose
-- fetches are lost sends them again later, and two ticks never send one URL twice.
-- KEYS[1] the crawl's schedule ZSET, URL -> packed slot (Keys.revisits; core/revisit.py)
-- ARGV[1] batch size
-- ARGV[2] lease seconds
-- ARGV[3] the bits of a score below its due second (core/revisit.CODE_BITS)
-- Returns URL, score pairs as scheduled before the lease.
-- include: now.lua
local scale = 2 ^ tonumber(ARGV[3])
local top = string.format('%.0f', math.floor(now) * scale + scale - 1)
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', top, 'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[1]))
local until_ = math.floor(now + tonumber(ARGV[2])) * scale
for i = 1, #due, 2 do
  local code = tonumber(due[i + 1]) % scale
  redis.call('ZADD', KEYS[1], 'XX', string.format('%.0f', until_ + code), due[i])
end
return due
