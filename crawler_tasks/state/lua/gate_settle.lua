-- settle: what became of outstanding tokens of one crawl (queued store records), each
-- counted only while it is still outstanding, so once.
-- KEYS[1] the crawl's outstanding SET (Keys.outstanding)
-- KEYS[2] the crawl's stats HASH (Keys.stats)
-- KEYS[3] the crawl's errors LIST (Keys.errors)
-- ARGV per token: token, how, n, then n (counter name, amount) pairs; how is 'end' (the
--   token leaves, counted), 'keep' (counted while it stays outstanding) or an error line
--   (it leaves, counted, and the line goes on the errors list)
-- Returns per token 1 when it was still outstanding, else 0.
-- Counters are summed over the tokens and added once per name, and the tokens are looked up
-- and removed in one SMISMEMBER and one SREM (a batch of pages costs one command per
-- counter, not one per page).
local CHUNK = 1000
local tokens, hows, at = {}, {}, {}
local i = 1
while i <= #ARGV do
  tokens[#tokens + 1], hows[#hows + 1], at[#at + 1] = ARGV[i], ARGV[i + 1], i
  i = i + 3 + 2 * tonumber(ARGV[i + 2])
end
local member = {}
for c = 1, #tokens, CHUNK do
  local got = redis.call('SMISMEMBER', KEYS[1], unpack(tokens, c, math.min(c + CHUNK - 1, #tokens)))
  for k, v in ipairs(got) do member[c + k - 1] = v end
end
-- A token that leaves is no longer outstanding for a later copy of it in the same batch.
local out, gone, leaving, sums, names = {}, {}, {}, {}, {}
for k = 1, #tokens do
  local token, how, first = tokens[k], hows[k], at[k]
  local live = (member[k] == 1 and not gone[token]) and 1 or 0
  if live == 1 then
    if how ~= 'keep' then gone[token] = true; leaving[#leaving + 1] = token end
    for j = first + 3, first + 1 + 2 * tonumber(ARGV[first + 2]), 2 do
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
end
for c = 1, #leaving, CHUNK do
  redis.call('SREM', KEYS[1], unpack(leaving, c, math.min(c + CHUNK - 1, #leaving)))
end
for _, name in ipairs(names) do
  if sums[name] ~= 0 then redis.call('HINCRBY', KEYS[2], name, string.format('%d', sums[name])) end
end
return out
