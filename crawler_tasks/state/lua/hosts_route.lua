-- route: a page's new fetches go to the broker, or, those whose host may not take them now,
-- straight into the host's waiting room (room.lua), as park would put them after a delivery
-- that could only find the host busy (the mover hands them on when the host may go). Only for
-- a broker that is this Redis: the band lists and the host keys are named here, from their
-- templates (keys.lua), which a Redis Cluster would not allow.
-- KEYS[1] the due hosts ZSET (Keys.hosts_due)
-- KEYS[2] the recent hosts ZSET (Keys.hosts_recent)
-- KEYS[3] the arrivals counter (Keys.hosts_arrivals)
-- KEYS[4] the waiting fetches per crawl HASH (Keys.hosts_waiting_crawls)
-- ARGV[1] JSON {"host": ..., "slots": ..., "wait": ...}: the templates of Keys.host,
--         Keys.host_slots and Keys.host_wait (keys.template)
-- ARGV[2] delay floor (s)
-- ARGV[3] concurrency per host (0 = no cap)
-- ARGV[4] '1' when AutoThrottle is on
-- ARGV[5] AutoThrottle start delay (s)
-- ARGV[6] TTL of a host's state (s)
-- ARGV[7] recent hosts kept
-- ARGV[8] what closes a message after its delivery tag (handover.lua)
-- then four values per fetch: its host (host:port), its waiting-room entry, which carries its
-- message (waiting_room.carried), its band's rank (0 = the highest band), its crawl id.
-- Returns how many fetches went to a waiting room.
-- include: now.lua
-- include: limits.lua
-- include: keys.lua
-- include: recent.lua
-- include: room.lua
-- include: handover.lua
local K = cjson.decode(ARGV[1])
local floor, cap, auto, start = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local parked, tag = 0, nil
for i = 9, #ARGV, 4 do
  local host = ARGV[i]
  local hk, sk, wk = key_of(K.host, host), key_of(K.slots, host), key_of(K.wait, host)
  local nxt, _, conc, _, waiting = limits(hk, floor, cap, auto, start)
  local busy = now < nxt or waiting
  if not busy and conc > 0 then
    redis.call('ZREMRANGEBYSCORE', sk, '-inf', now)
    busy = redis.call('ZCARD', sk) >= conc
  end
  if busy then
    wait_in_room(hk, wk, KEYS[1], KEYS[3], KEYS[2], host, ARGV[i + 1], tonumber(ARGV[i + 2]),
                 math.max(now, nxt), ARGV[6], tonumber(ARGV[7]), waiting, KEYS[4], ARGV[i + 3])
    parked = parked + 1
  else
    -- a delivery tag unique to this call (arrival numbers come from the same counter)
    if not tag then tag = tostring(redis.call('INCR', KEYS[3])) end
    send_entry(ARGV[i + 1], tag, ARGV[8])
  end
end
return parked
