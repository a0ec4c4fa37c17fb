-- take: a worker takes a batch of store entries onto its own taken list (the reliable
-- queue), once the pending list holds a full batch, its oldest entry waited the flush
-- time, nothing arrived since the last look, or the worker asks now; a worker whose last
-- batch did not settle gets that batch again first. Its lease is set either way.
-- KEYS[1] the pending LIST (Keys.store_pending)
-- KEYS[2] when the oldest pending entry arrived, STRING (Keys.store_since)
-- KEYS[3] the leases ZSET, consumer -> lease expiry (Keys.store_leases)
-- KEYS[4] this worker's taken LIST (Keys.store_taken)
-- KEYS[5] the pending list's length at the last look, STRING (Keys.store_looked)
-- ARGV[1] batch size
-- ARGV[2] flush seconds
-- ARGV[3] lease seconds
-- ARGV[4] '1': take whatever waits now
-- ARGV[5] consumer (the worker's id)
-- ARGV[6] most bytes taken (0 = no cap; the first entry always goes)
-- Returns the entries taken (none when no batch is due).
-- include: now.lua
-- include: store_due.lua
if redis.call('LLEN', KEYS[4]) > 0 then  -- what this worker took before and did not settle
  redis.call('ZADD', KEYS[3], now + tonumber(ARGV[3]), ARGV[5])
  return redis.call('LRANGE', KEYS[4], 0, -1)
end
local len = redis.call('LLEN', KEYS[1])
if len == 0 then return {} end
local n = tonumber(ARGV[1])
if not batch_due(len, KEYS[2], KEYS[5], n, tonumber(ARGV[2])) and ARGV[4] ~= '1' then return {} end
local items = redis.call('LRANGE', KEYS[1], 0, n - 1)
local budget, size = tonumber(ARGV[6]), 0
if budget > 0 then
  local kept = {}
  for i = 1, #items do
    size = size + #items[i]
    if i > 1 and size > budget then break end
    kept[i] = items[i]
  end
  items = kept
end
n = #items
redis.call('LTRIM', KEYS[1], n, -1)
for i = 1, n, 1000 do
  redis.call('RPUSH', KEYS[4], unpack(items, i, math.min(i + 999, n)))
end
redis.call('ZADD', KEYS[3], now + tonumber(ARGV[3]), ARGV[5])
if len <= n then redis.call('DEL', KEYS[2], KEYS[5]) else redis.call('SET', KEYS[5], len - n) end
return items
