-- look and add: the entries of a page's simhash bands, read as they were, then the page
-- added to each band's bucket (its own entry replaced when it was there: a revisit). A
-- bucket keeps its newest entries, at most ARGV[3] of them.
-- KEYS[1..n] the crawl's band HASHes (Keys.near_dups), band value -> entries
-- ARGV[1] the page's entry: its simhash (8 bytes) then its fingerprint (20 bytes)
-- ARGV[2] entry size (28)
-- ARGV[3] entries a bucket keeps at most
-- ARGV[4..3+n] the page's band values, one per key
-- Returns each bucket's entries before the page was added.
local entry, size, cap = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local me = string.sub(entry, 9)
local out = {}
for i = 1, #KEYS do
  local field = ARGV[3 + i]
  local bucket = redis.call('HGET', KEYS[i], field) or ''
  out[i] = bucket
  local kept = {}
  for at = 1, #bucket, size do
    local other = string.sub(bucket, at, at + size - 1)
    if string.sub(other, 9) ~= me then kept[#kept + 1] = other end
  end
  kept[#kept + 1] = entry
  local first = math.max(1, #kept - cap + 1)
  redis.call('HSET', KEYS[i], field, table.concat(kept, '', first))
end
return out
