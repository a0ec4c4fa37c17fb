-- settle: what became of outstanding tokens of one crawl (queued store records), each
-- counted only while it is still outstanding, so once.
-- KEYS[1] the crawl's outstanding SET (Keys.outstanding)
-- KEYS[2] the crawl's stats HASH (Keys.stats)
-- KEYS[3] the crawl's errors LIST (Keys.errors)
-- ARGV per token: token, how, n, then n (counter name, amount) pairs; how is 'end' (the
--   token leaves, counted), 'keep' (counted while it stays outstanding) or an error line
--   (it leaves, counted, and the line goes on the errors list)
-- Returns per token 1 when it was still outstanding, else 0.
-- Counters are summed over the tokens and added once per name (a batch of pages costs
-- one HINCRBY per counter, not one per page).
local out, i, sums, names = {}, 1, {}, {}
while i <= #ARGV do
  local token, how, n = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2])
  local live
  if how == 'keep' then live = redis.call('SISMEMBER', KEYS[1], token)
  else live = redis.call('SREM', KEYS[1], token) end
  if live == 1 then
    for j = i + 3, i + 1 + 2 * n, 2 do
      local name = ARGV[j]
      if sums[name] == nil then names[#names + 1] = name; sums[name] = 0 end
      sums[name] = sums[name] + tonumber(ARGV[j + 1])
    end
    if how ~= 'end' and how ~= 'keep' then
      redis.call('LPUSH', KEYS[3], how)
      redis.call('LTRIM', KEYS[3], 0, 99)
    end
  end
  out[#out + 1] = live
  i = i + 3 + 2 * n
end
for _, name in ipairs(names) do
  if sums[name] ~= 0 then redis.call('HINCRBY', KEYS[2], name, string.format('%d', sums[name])) end
end
return out
