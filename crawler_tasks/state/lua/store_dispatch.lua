-- dispatch: whether to send one more store task (a writer). The first writer goes once a
-- batch is due, as take would find it (a full batch, its oldest entry waited the flush
-- time, or nothing arrived since the last look); another one only while more full
-- batches wait than writers hold a lease, and never more than ARGV[4] at once. A writer
-- sent gets its lease here, so the next look counts it while its task waits in the broker.
-- KEYS[1] the pending LIST (Keys.store_pending)
-- KEYS[2] when the oldest pending entry arrived, STRING (Keys.store_since)
-- KEYS[3] the leases ZSET, consumer -> lease expiry (Keys.store_leases)
-- KEYS[4] the pending list's length at the last look, STRING (Keys.store_looked)
-- ARGV[1] batch size
-- ARGV[2] flush seconds
-- ARGV[3] lease seconds
-- ARGV[4] most writers at once
-- ARGV[5] the new writer's id
-- Returns 1 when the caller is to send the writer's task, else 0.
-- include: now.lua
-- include: store_due.lua
local len = redis.call('LLEN', KEYS[1])
if len == 0 then return 0 end
local n = tonumber(ARGV[1])
local active = redis.call('ZCOUNT', KEYS[3], '(' .. now, '+inf')
if active >= tonumber(ARGV[4]) then return 0 end
if active > 0 then
  if math.floor(len / n) <= active then return 0 end
elseif not batch_due(len, KEYS[2], KEYS[4], n, tonumber(ARGV[2])) then
  return 0
end
redis.call('ZADD', KEYS[3], now + tonumber(ARGV[3]), ARGV[5])
return 1
