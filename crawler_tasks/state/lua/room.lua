-- Fragment: wait_in_room(hk, wk, due, arrivals, recent, host, member, rank, at, ttl, keep,
-- flagged, counts, crawl) puts the fetch `member` (state/waiting_room.py) of crawl `crawl` in the
-- waiting room `wk` of `host` (whose HASH is `hk`), in its band's rank `rank` (0 = the
-- highest band) after the fetches already there (the counter `arrivals`; a member already
-- there stays where it is, counted once in the crawl's field of the HASH `counts`), marks the host
-- as having fetches waiting (its field `waiting`, unless `flagged` says it is marked), makes
-- the host due in `due` at `at` at the latest, counts it deferred, keeps the host's state
-- `ttl` seconds and notes the host in `recent` (at most about `keep`). Needs now.lua and
-- recent.lua first.
local function wait_in_room(hk, wk, due, arrivals, recent, host, member, rank, at, ttl, keep, flagged,
                            counts, crawl)
  local score = rank * 1e13 + redis.call('INCR', arrivals) % 1e13
  if redis.call('ZADD', wk, 'NX', score, member) == 1 then redis.call('HINCRBY', counts, crawl, 1) end
  if not flagged then redis.call('HSET', hk, 'waiting', 1) end
  local cur = tonumber(redis.call('ZSCORE', due, host))
  if not cur or at < cur then redis.call('ZADD', due, at, host) end
  redis.call('HINCRBY', hk, 'deferred', 1)
  redis.call('EXPIRE', hk, ttl)
  note_recent(recent, now, host, keep)
end
