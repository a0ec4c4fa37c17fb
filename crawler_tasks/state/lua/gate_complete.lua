-- complete (the gate): the one call a task ends with, or that gates seeds. A late duplicate
-- of a finished task is refused ('stale'); a task that completed before but died before
-- publishing gets its children's first task ids back, uncounted ('replay'); otherwise its
-- candidates are tested against the crawl's seen filter, the new ones admitted within the
-- page budget and added to the outstanding set, and the task's counters applied ('ok').
-- The seen filter's fragment fills the slot {seen} (seen_set.lua, seen_recent.lua or
-- seen_bloom.lua): it defines seen_test(fps) -> booleans and seen_add(fps), over KEYS[2]
-- and the parameters P.
-- KEYS[1] the crawl's outstanding SET (Keys.outstanding)
-- KEYS[2] the seen filter's key or stem (SeenFilter.key)
-- KEYS[3] the crawl's stats HASH (Keys.stats)
-- KEYS[4] the finishing task's replay HASH (Keys.replay; any key of the crawl for seeds)
-- ARGV[1] finishing task id ('' for seeds)
-- ARGV[2] max pages (0 = no budget)
-- ARGV[3] replay TTL (s)
-- ARGV[4] the filter's parameters, JSON (SeenFilter.params): P
-- ARGV[5] n, the number of counters
-- ARGV[6..5+2n] n (counter name, amount) pairs
-- ARGV[6+2n..] (fingerprint, task id, kind) triples, fingerprints unique; kind '0' gated,
--   '1' bypass (dont_filter), 's' a pipeline stage (bypass, not counted as admitted)
-- Returns {verdict, then per candidate its task id or a refusal}: verdict 'ok' or
-- 'replay' (a refusal is '-d' duplicate, '-b' over the page budget), or {'stale'}.
local me, limit, ttl, n = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[5])
local P = cjson.decode(ARGV[4])
local first = 6 + 2 * n
local CHUNK = 1000
local function each_chunk(list, fn)
  for i = 1, #list, CHUNK do fn(unpack(list, i, math.min(i + CHUNK - 1, #list))) end
end
-- include: {seen}
-- include: replayed.lua
local fps, tids, bypass, stage = {}, {}, {}, {}
for i = first, #ARGV, 3 do
  local n = #fps + 1
  fps[n], tids[n], bypass[n], stage[n] = ARGV[i], ARGV[i + 1], ARGV[i + 2] ~= '0', ARGV[i + 2] == 's'
end
if me ~= '' then
  if redis.call('SISMEMBER', KEYS[1], me) == 0 then return {'stale'} end
  if redis.call('HEXISTS', KEYS[4], '~') == 1 then return replayed(KEYS[4], fps) end
end
local filtered = {}
for i = 1, #fps do if not bypass[i] then filtered[#filtered + 1] = fps[i] end end
local member = seen_test(filtered)
local limited, room = limit > 0, 0
if limited then
  room = math.max(0, limit - tonumber(redis.call('HGET', KEYS[3], 'gate/admitted') or '0'))
end
local out, new_fps, new_tids, pairs_ = {'ok'}, {}, {}, {}
local admitted, duplicates, over, j = 0, 0, 0, 0
for i = 1, #fps do
  local ok, refusal = bypass[i], '-d'
  if not ok then
    j = j + 1
    if member[j] then
      duplicates = duplicates + 1
    elseif limited and room == 0 then
      over = over + 1
      refusal = '-b'
    else
      ok = true
      new_fps[#new_fps + 1] = fps[i]
      room = room - 1
    end
  end
  if ok then
    if not stage[i] then admitted = admitted + 1 end
    new_tids[#new_tids + 1] = tids[i]
    if me ~= '' then
      pairs_[#pairs_ + 1] = fps[i]
      pairs_[#pairs_ + 1] = tids[i]
    end
    out[#out + 1] = tids[i]
  else
    out[#out + 1] = refusal
  end
end
seen_add(new_fps)
each_chunk(new_tids, function(...) redis.call('SADD', KEYS[1], ...) end)
if me ~= '' then
  pairs_[#pairs_ + 1] = '~'
  pairs_[#pairs_ + 1] = '1'
  each_chunk(pairs_, function(...) redis.call('HSET', KEYS[4], ...) end)
  redis.call('EXPIRE', KEYS[4], ttl)
end
for i = 6, first - 1, 2 do
  if ARGV[i] == 'duplicates' then
    duplicates = duplicates + tonumber(ARGV[i + 1])
  else
    redis.call('HINCRBY', KEYS[3], ARGV[i], ARGV[i + 1])
  end
end
if admitted > 0 then redis.call('HINCRBY', KEYS[3], 'gate/admitted', admitted) end
if duplicates > 0 then redis.call('HINCRBY', KEYS[3], 'duplicates', duplicates) end
if over > 0 then redis.call('HINCRBY', KEYS[3], 'gate/over_budget', over) end
return out
