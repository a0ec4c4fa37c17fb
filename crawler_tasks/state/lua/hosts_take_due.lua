-- take_due (the mover): the waiting fetches of hosts that may go now, each with a slot
-- reserved for it (handover.lua): those that carry their message go onto their bands here, the
-- others stay in `moving` until the mover says it published them, and entries whose move lease
-- ran out go back to their host's waiting room first. The
-- per-host keys of the hosts it visits are named here, from their templates (keys.lua):
-- all of them carry the hash tag {hosts}, the slot of KEYS.
-- KEYS[1] the due hosts ZSET, host -> when to look at it (Keys.hosts_due)
-- KEYS[2] the moving ZSET, host TAB score TAB entry -> lease expiry (Keys.hosts_moving)
-- KEYS[3] the waiting fetches per crawl HASH (Keys.hosts_waiting_crawls): a moving fetch
--         still counts; one whose lease ran out and that its room holds already counts once
-- ARGV[1] JSON {"host": ..., "slots": ..., "wait": ...}: the templates of Keys.host,
--         Keys.host_slots and Keys.host_wait (keys.template)
-- ARGV[2] hosts looked at per call, at most
-- ARGV[3] delay floor (s)
-- ARGV[4] concurrency per host (0 = no cap)
-- ARGV[5] '1' when AutoThrottle is on
-- ARGV[6] seconds a slot stays reserved for a moved fetch
-- ARGV[7] move lease (s)
-- ARGV[8] fetches released at once to a host with no delay and no cap
-- ARGV[9] AutoThrottle start delay (s)
-- ARGV[10] lead (s): a host is handed its next fetch this long before its next time (the
--          due hosts are looked at this far ahead), the hand-over's own latency; the fetch
--          then waits out the rest (hosts_acquire.lua). Due times stay the hosts' own.
-- ARGV[11] what closes a message after its delivery tag ('': the broker is not this Redis,
--          the mover publishes every fetch)
-- Returns {seconds until the next host is due (-1: none waits), then per fetch taken for the
-- mover its moving entry: host TAB score TAB waiting-room entry}.
-- include: now.lua
-- include: limits.lua
-- include: keys.lua
-- include: handover.lua
local K = cjson.decode(ARGV[1])
local lead = tonumber(ARGV[10])
for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, 100)) do
  local a = string.find(m, '\t', 1, true)
  local b = string.find(m, '\t', a + 1, true)
  local host = string.sub(m, 1, a - 1)
  local entry = string.sub(m, b + 1)
  if redis.call('ZADD', key_of(K.wait, host), 'NX', string.sub(m, a + 1, b - 1), entry) == 0 then
    redis.call('HINCRBY', KEYS[3], entry_crawl(entry), -1)
  end
  redis.call('HSET', key_of(K.host, host), 'waiting', 1)
  redis.call('ZADD', KEYS[1], now, host)
  redis.call('ZREM', KEYS[2], m)
end
local out = {}
for _, host in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now + lead, 'LIMIT', 0, tonumber(ARGV[2]))) do
  local hk, sk, wk = key_of(K.host, host), key_of(K.slots, host), key_of(K.wait, host)
  redis.call('ZREMRANGEBYSCORE', sk, '-inf', now)
  local nxt, delay, conc = pace(hk, tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[9]))
  if redis.call('EXISTS', wk) == 0 then
    redis.call('ZREM', KEYS[1], host)
    redis.call('HDEL', hk, 'waiting')
  elseif now + lead < nxt then
    redis.call('ZADD', KEYS[1], nxt, host)
  else
    local free = tonumber(ARGV[8])
    if conc > 0 then free = conc - redis.call('ZCARD', sk) end
    if free <= 0 then
      local first = redis.call('ZRANGE', sk, 0, 0, 'WITHSCORES')
      redis.call('ZADD', KEYS[1], tonumber(first[2]), host)
    else
      hand_over(host, hk, sk, wk, KEYS[1], KEYS[2], KEYS[3], free, delay, nxt, tonumber(ARGV[6]),
                tonumber(ARGV[7]), ARGV[11], out)
    end
  end
end
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local wait = -1
if first[2] then wait = math.max(0, tonumber(first[2]) - lead - now) end
table.insert(out, 1, tostring(wait))
return out
