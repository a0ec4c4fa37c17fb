-- tick: the taken list of each worker whose lease ran out (SIGKILL, a lost node) goes back
-- to the head of the pending list, and due delayed entries to its tail. The taken lists
-- are named here from their template (keys.lua), in the slot {store} of KEYS.
-- KEYS[1] the pending LIST (Keys.store_pending)
-- KEYS[2] when the oldest pending entry arrived, STRING (Keys.store_since)
-- KEYS[3] the leases ZSET, consumer -> lease expiry (Keys.store_leases)
-- KEYS[4] the delayed ZSET, entry -> when to try it again (Keys.store_delayed)
-- ARGV[1] JSON: the template of Keys.store_taken (keys.template)
-- ARGV[2] most delayed entries moved
-- Returns how many entries moved.
-- include: now.lua
-- include: keys.lua
local taken = cjson.decode(ARGV[1])
local moved = 0
for _, c in ipairs(redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'LIMIT', 0, 20)) do
  local key = key_of(taken, c)
  local items = redis.call('LRANGE', key, 0, -1)
  for i = #items, 1, -1 do redis.call('LPUSH', KEYS[1], items[i]) end
  moved = moved + #items
  redis.call('DEL', key)
  redis.call('ZREM', KEYS[3], c)
end
local due = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now, 'LIMIT', 0, tonumber(ARGV[2]))
for i = 1, #due, 1000 do
  local part = {unpack(due, i, math.min(i + 999, #due))}
  redis.call('RPUSH', KEYS[1], unpack(part))
  redis.call('ZREM', KEYS[4], unpack(part))
end
moved = moved + #due
if moved > 0 then redis.call('SET', KEYS[2], 0) end
return moved
