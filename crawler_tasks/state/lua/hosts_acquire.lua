-- acquire: may a fetch of one host start now? If so it takes a slot (a lease) of the host.
-- KEYS[1] the host's HASH of limits (Keys.host)
-- KEYS[2] the host's slots ZSET, task id -> lease expiry (Keys.host_slots)
-- KEYS[3] the recent hosts ZSET (Keys.hosts_recent)
-- KEYS[4] the benched proxies ZSET (Keys.proxies_benched)
-- ARGV[1] task id
-- ARGV[2] delay floor (s): the setting or the host's Crawl-delay, the larger
-- ARGV[3] concurrency per host (0 = no cap): the setting or the fetch's crawl's own; kept
--         in the host's field `conc` for the fetches waiting in its room
-- ARGV[4] '1' when AutoThrottle is on
-- ARGV[5] slot lease (s)
-- ARGV[6] host name (host:port)
-- ARGV[7] TTL of the host's state (s)
-- ARGV[8] proxies configured (0 = none)
-- ARGV[9] AutoThrottle start delay (s)
-- ARGV[10] recent hosts kept
-- ARGV[11] lead (s): a fetch the mover handed over this early (its slot reserved) goes at
--          the host's next time without waiting in the room again: it is told to wait that long
-- ARGV[12] margin (s): such a fetch goes this long after the host's next time (the previous
--          request may have reached the host a little after its own start)
-- Returns {1, delay, proxy index (-1 direct), seconds to wait before sending} when the fetch
-- may go (a slot taken), or {0, Redis time (as text) until which it must wait}.
-- include: now.lua
-- include: limits.lua
-- include: recent.lua
local nxt, delay, conc, requests, waiting = limits(KEYS[1], tonumber(ARGV[2]), tonumber(ARGV[3]),
                                                  tonumber(ARGV[4]), tonumber(ARGV[9]), true)
-- The leases of killed workers expire: counted out before the cap is checked (with no cap,
-- now and then, so that the ZSET does not grow).
if conc > 0 or requests % 32 == 0 then redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now) end
-- Whether this fetch holds a slot already (the mover reserved one when it handed the fetch
-- over) matters only when others wait or the host has a cap: asked only then. Otherwise a
-- slot given back is removed whether held or not (removing none is harmless).
local asked = waiting or conc > 0
local held = asked and redis.call('ZSCORE', KEYS[2], ARGV[1])
if not held then
  if waiting then return {0, tostring(math.max(now, nxt))} end
  if conc > 0 and redis.call('ZCARD', KEYS[2]) >= conc then return {0, tostring(now)} end
end
local function give_back() if held or not asked then redis.call('ZREM', KEYS[2], ARGV[1]) end end
local start = now
if now < nxt then
  if not asked then held = redis.call('ZSCORE', KEYS[2], ARGV[1]) end
  if not (held and nxt - now <= tonumber(ARGV[11])) then
    give_back()
    return {0, tostring(nxt)}
  end
  start = nxt + tonumber(ARGV[12])  -- handed over early: it goes at the host's next time, from this slot
end
local proxy, n = -1, tonumber(ARGV[8])
if n > 0 and redis.call('HGET', KEYS[1], 'proxied') == '1' then
  -- the next proxy in turn for this host, skipping benched ones
  local seq, soonest = redis.call('HINCRBY', KEYS[1], 'pseq', 1), nil
  for k = 0, n - 1 do
    local i = (seq + k) % n
    local benched = tonumber(redis.call('ZSCORE', KEYS[4], i))
    if not benched or benched <= now then proxy = i; break end
    if not soonest or benched < soonest then soonest = benched end
  end
  if proxy < 0 then
    give_back()
    return {0, tostring(soonest)}
  end
end
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[5]), ARGV[1])
requests = requests + 1
redis.call('HSET', KEYS[1], 'next', kept_time(start + delay), 'delay', tostring(delay), 'requests', requests,
           'conc', ARGV[3])
if requests % 32 == 1 then
  -- now and then, not on every request: keep the state alive and the host in the recent list
  redis.call('EXPIRE', KEYS[1], ARGV[7])
  redis.call('EXPIRE', KEYS[2], ARGV[7])
  note_recent(KEYS[3], now, ARGV[6], tonumber(ARGV[10]))
end
return {1, tostring(delay), proxy, tostring(start - now)}
