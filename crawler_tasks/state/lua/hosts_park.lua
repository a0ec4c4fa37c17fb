-- park: a fetch that may not go yet waits in its host's waiting room, in its band, and the
-- host is scheduled for the mover (a redelivered park adds the same entry once).
-- KEYS[1] the host's HASH of limits (Keys.host)
-- KEYS[2] the host's waiting room ZSET (Keys.host_wait)
-- KEYS[3] the due hosts ZSET, host -> when the mover looks at it (Keys.hosts_due)
-- KEYS[4] the recent hosts ZSET (Keys.hosts_recent)
-- KEYS[5] the host's slots ZSET (Keys.host_slots)
-- KEYS[6] the arrivals counter (Keys.hosts_arrivals)
-- KEYS[7] the waiting fetches per crawl HASH (Keys.hosts_waiting_crawls)
-- ARGV[1] the waiting-room entry, of either form (state/waiting_room.py)
-- ARGV[2] its band's rank (0 = the highest band)
-- ARGV[3] earliest Redis time it may go
-- ARGV[4] host name (host:port)
-- ARGV[5] TTL of the host's state (s)
-- ARGV[6] task id
-- ARGV[7] recent hosts kept
-- ARGV[8] the fetch's crawl id
-- Returns 1.
-- include: now.lua
-- include: recent.lua
-- include: room.lua
redis.call('ZREM', KEYS[5], ARGV[6])  -- a waiting fetch holds no slot, reserved or not
local h = redis.call('HMGET', KEYS[1], 'next', 'waiting')
local at = math.max(tonumber(ARGV[3]), tonumber(h[1]) or 0)
wait_in_room(KEYS[1], KEYS[2], KEYS[3], KEYS[6], KEYS[4], ARGV[4], ARGV[1], tonumber(ARGV[2]), at,
             ARGV[5], tonumber(ARGV[7]), h[2] == '1', KEYS[7], ARGV[8])
return 1
