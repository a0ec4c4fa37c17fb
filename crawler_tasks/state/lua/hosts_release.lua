-- release: a download of one host ended; its slot is freed and the host's limits follow
-- what the answer said (429/503 and Retry-After back off, successes relax, timeouts cut the
-- concurrency, AutoThrottle follows the latency, blocking signs turn proxies on).
-- KEYS[1] the host's HASH of limits (Keys.host)
-- KEYS[2] the host's slots ZSET (Keys.host_slots)
-- KEYS[3] the due hosts ZSET (Keys.hosts_due)
-- KEYS[4] the benched proxies ZSET (Keys.proxies_benched)
-- ARGV[1] task id
-- ARGV[2] kind of answer: ok, throttled, timeout, blocked, proxy or error (core.politeness)
-- ARGV[3] HTTP status (0 without an answer)
-- ARGV[4] Retry-After (s, -1 none)
-- ARGV[5] latency (s, -1 none)
-- ARGV[6] delay floor (s)
-- ARGV[7] back-off cap (s)
-- ARGV[8] '1' when AutoThrottle is on
-- ARGV[9] AutoThrottle target concurrency
-- ARGV[10] AutoThrottle max delay (s)
-- ARGV[11] AutoThrottle start delay (s)
-- ARGV[12] host name (host:port)
-- ARGV[13] blocking signs before the host goes through proxies
-- ARGV[14] proxies configured (0 = none)
-- ARGV[15] proxy used (its index, -1 direct)
-- ARGV[16] seconds a failed proxy is left out
-- ARGV[17] seconds since the request went out (-1 not known): the next request waits the
--   host's delay from then too (a busy worker may send a while after taking its slot)
-- KEYS[5] the host's waiting room ZSET (Keys.host_wait)
-- KEYS[6] the waiting fetches per crawl HASH (Keys.hosts_waiting_crawls)
-- ARGV[18] what closes a message after its delivery tag ('': the broker is not this Redis):
--   when the host may go now, its next waiting fetch goes onto its band from here, its slot
--   reserved (handover.lua), rather than waiting for the mover's look
-- ARGV[19] concurrency per host (0 = no cap), for a host that has not kept its own
-- ARGV[20] seconds a slot stays reserved for a fetch handed over
-- ARGV[21] lead (s): a fetch may be handed over this long before the host's next time
-- Returns 1 when the host goes through proxies, else 0.
-- include: now.lua
-- include: limits.lua
-- include: consts.lua
-- include: handover.lua
redis.call('ZREM', KEYS[2], ARGV[1])
local kind, floor = ARGV[2], tonumber(ARGV[6])
local h = redis.call('HMGET', KEYS[1], 'next', 'backoff', 'strikes', 'cut', 'good', 'auto', 'ban', 'proxied',
                     'waiting')
local nxt, b, auto = tonumber(h[1]) or 0, tonumber(h[2]) or 0, tonumber(h[6])
local strikes, cut, good = tonumber(h[3]) or 0, tonumber(h[4]) or 0, tonumber(h[5]) or 0
if kind == KIND_THROTTLED then
  b = math.min(math.max(b * 2, floor * 2, BACKOFF_START), tonumber(ARGV[7]))
  local ra = tonumber(ARGV[4])
  local pause = b
  if ra >= 0 then pause = math.min(ra, tonumber(ARGV[7])) end
  if now + pause > nxt then nxt = now + pause end
  redis.call('HSET', KEYS[1], 'backoff', tostring(b), 'next', kept_time(nxt))
  redis.call('HINCRBY', KEYS[1], 'throttled', 1)
elseif kind == KIND_TIMEOUT then
  strikes = strikes + 1
  if strikes >= TIMEOUT_STRIKES then cut = cut + 1; strikes = 0 end
  redis.call('HSET', KEYS[1], 'strikes', strikes, 'cut', cut, 'good', 0)
elseif kind == KIND_OK then
  if b > 0 then
    b = b / 2
    if b <= floor or b < BACKOFF_MIN then redis.call('HDEL', KEYS[1], 'backoff'); b = 0
    else redis.call('HSET', KEYS[1], 'backoff', tostring(b)) end
  end
  if cut > 0 then
    good = good + 1
    if good >= GOOD_TO_RESTORE then cut = cut - 1; good = 0 end
    redis.call('HSET', KEYS[1], 'strikes', 0, 'cut', cut, 'good', good)
  elseif strikes > 0 then
    redis.call('HSET', KEYS[1], 'strikes', 0)
  end
end
local latency = tonumber(ARGV[5])
if ARGV[8] == '1' and latency >= 0 and kind ~= KIND_TIMEOUT then
  -- Scrapy's AutoThrottle: move half-way towards latency / target concurrency.
  local cur = tonumber(h[6]) or math.max(floor, tonumber(ARGV[11]))
  local target = latency / tonumber(ARGV[9])
  local new = math.max(target, (cur + target) / 2)
  new = math.min(math.max(floor, new), tonumber(ARGV[10]))
  if ARGV[3] == '200' or new > cur then
    auto = tonumber(tostring(new))  -- as kept
    redis.call('HSET', KEYS[1], 'auto', tostring(new))
  end
end
local since = tonumber(ARGV[17])
if since >= 0 then
  local delay = host_delay(floor, b, auto, ARGV[8] == '1' and 1 or 0, tonumber(ARGV[11]))
  -- written only when it holds the next request back (a time already past changes nothing)
  if now - since + delay > nxt and delay > since then
    nxt = now - since + delay
    redis.call('HSET', KEYS[1], 'next', kept_time(nxt))
  end
end
if h[9] == '1' then  -- fetches wait in the host's room (room.lua)
  local handed = false
  if ARGV[18] ~= '' then
    local at, delay, conc = pace(KEYS[1], floor, tonumber(ARGV[19]), tonumber(ARGV[8]), tonumber(ARGV[11]))
    if now + tonumber(ARGV[21]) >= at then
      local free = 1
      if conc > 0 then
        redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
        free = conc - redis.call('ZCARD', KEYS[2])
      end
      if free > 0 then
        hand_over(ARGV[12], KEYS[1], KEYS[2], KEYS[5], KEYS[3], nil, KEYS[6], free, delay, at,
                  tonumber(ARGV[20]), 0, ARGV[18], {})
        handed = true
      end
    end
  end
  if not handed then redis.call('ZADD', KEYS[3], math.max(now, nxt), ARGV[12]) end
end
local ban, proxied = tonumber(h[7]) or 0, h[8] == '1'
if kind == KIND_BLOCKED or kind == KIND_THROTTLED then
  ban = ban + 1
  redis.call('HSET', KEYS[1], 'ban', ban)
  if kind == KIND_BLOCKED then redis.call('HINCRBY', KEYS[1], 'blocked', 1) end
  if tonumber(ARGV[14]) > 0 and ban >= tonumber(ARGV[13]) then
    redis.call('HSET', KEYS[1], 'proxied', 1)
    proxied = true
  end
elseif kind == KIND_OK and tonumber(ARGV[3]) < 400 and ban > 0 then
  redis.call('HSET', KEYS[1], 'ban', 0)
end
if kind == KIND_PROXY and tonumber(ARGV[15]) >= 0 then
  redis.call('ZADD', KEYS[4], now + tonumber(ARGV[16]), ARGV[15])
end
if proxied and tonumber(ARGV[14]) > 0 then return 1 end
return 0
