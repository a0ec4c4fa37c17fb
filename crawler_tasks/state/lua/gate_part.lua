-- part (a gate of several shards): the candidates of one shard of a task's completion, or of
-- a seed call. Tests the gated ones against the shard's seen filter; the new ones and those
-- that bypass it join the shard's outstanding set, the new ones the filter. With a task (or
-- a record name of its own), what it answered is kept, and a second call answers the same
-- (a redelivery after a worker died mid-completion), counting nothing again.
-- The seen filter's fragment fills the slot {seen}, over KEYS[2] and P (as gate_complete.lua).
-- KEYS[1] the shard's outstanding SET (Keys.outstanding)
-- KEYS[2] the shard's seen filter's key or stem (SeenFilter.key)
-- KEYS[3] the shard's stats HASH (Keys.stats)
-- KEYS[4] the part's record HASH (Keys.part; any key of the shard when ARGV[1] is '')
-- ARGV[1] '1' to keep (and answer from) the record, '' not
-- ARGV[2] '1' when the crawl has a page budget: admissions are counted by gate_budget.lua
-- ARGV[3] replay TTL (s)
-- ARGV[4] the filter's parameters, JSON (SeenFilter.params): P
-- ARGV[5..] (fingerprint, task id, kind) triples, fingerprints unique; kind '0' gated, '1'
--   bypass (dont_filter), 's' a pipeline stage (bypass, not counted as admitted), 'x' gated
--   but kept outstanding in another shard (a task id given from outside: the caller adds it)
-- Returns {'ok' or 'replay', then per candidate its task id, or '-d' (duplicate)}.
local P = cjson.decode(ARGV[4])
local CHUNK = 1000
local function each_chunk(list, fn)
  for i = 1, #list, CHUNK do fn(unpack(list, i, math.min(i + CHUNK - 1, #list))) end
end
-- include: {seen}
-- include: replayed.lua
local fps, tids, kind = {}, {}, {}
for i = 5, #ARGV, 3 do
  local n = #fps + 1
  fps[n], tids[n], kind[n] = ARGV[i], ARGV[i + 1], ARGV[i + 2]
end
local kept = ARGV[1] == '1'
if kept and redis.call('HEXISTS', KEYS[4], '~') == 1 then return replayed(KEYS[4], fps) end
local filtered = {}
local function gated(i) return kind[i] == '0' or kind[i] == 'x' end
for i = 1, #fps do if gated(i) then filtered[#filtered + 1] = fps[i] end end
local member = seen_test(filtered)
local out, new_fps, joined, record = {'ok'}, {}, {}, {}
local admitted, duplicates, j = 0, 0, 0
for i = 1, #fps do
  local ok = not gated(i)
  if not ok then
    j = j + 1
    if member[j] then duplicates = duplicates + 1 else ok = true; new_fps[#new_fps + 1] = fps[i] end
  end
  if ok then
    if kind[i] ~= 's' then admitted = admitted + 1 end
    if kind[i] ~= 'x' then joined[#joined + 1] = tids[i] end
    record[#record + 1] = fps[i]
    record[#record + 1] = tids[i]
    out[#out + 1] = tids[i]
  else
    out[#out + 1] = '-d'
  end
end
seen_add(new_fps)
each_chunk(joined, function(...) redis.call('SADD', KEYS[1], ...) end)
if kept then
  record[#record + 1] = '~'
  record[#record + 1] = '1'
  each_chunk(record, function(...) redis.call('HSET', KEYS[4], ...) end)
  redis.call('EXPIRE', KEYS[4], ARGV[3])
end
if duplicates > 0 then redis.call('HINCRBY', KEYS[3], 'duplicates', duplicates) end
if admitted > 0 and ARGV[2] ~= '1' then redis.call('HINCRBY', KEYS[3], 'gate/admitted', admitted) end
return out
