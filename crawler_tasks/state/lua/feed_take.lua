-- feed_take: a seed-feed tick takes up to n entries of the start-URL key (a LIST from its
-- head, a SET at random, a ZSET lowest scores first) onto its taking list in one step, so
-- an entry a producer adds meanwhile is neither lost nor taken twice. Entries a tick took
-- but did not finish (its worker died) come back first.
-- KEYS[1] the start-URL key (CRAWLER_START_URLS_KEY, owned by the app that feeds it)
-- KEYS[2] its taking LIST, in the same slot (feeds.taking_key)
-- ARGV[1] n, how many entries to take
-- Returns the entries taken (those left on the taking list, if any).
local left = redis.call('LRANGE', KEYS[2], 0, -1)
if #left > 0 then return left end
local n, kind = tonumber(ARGV[1]), redis.call('TYPE', KEYS[1])['ok']
local items = {}
if kind == 'list' then
  items = redis.call('LRANGE', KEYS[1], 0, n - 1)
  redis.call('LTRIM', KEYS[1], #items, -1)
elseif kind == 'set' then
  items = redis.call('SPOP', KEYS[1], n)
elseif kind == 'zset' then
  local popped = redis.call('ZPOPMIN', KEYS[1], n)
  for i = 1, #popped, 2 do items[#items + 1] = popped[i] end
end
if #items > 0 then redis.call('RPUSH', KEYS[2], unpack(items)) end
return items
