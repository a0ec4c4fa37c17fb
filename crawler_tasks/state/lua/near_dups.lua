-- look and add: the entries of a page's simhash bands, read as they were, then the page
-- added to each band's bucket (its own entry replaced when it was there: a revisit). A
-- bucket keeps its newest entries, at most ARGV[3] of them. With a body digest, the first
-- page of that digest is kept too, and returned when it is another page.
-- KEYS[1] the crawl's digest HASH (Keys.digests)
-- KEYS[2..n+1] the crawl's band HASHes (Keys.near_dups), band value -> entries
-- ARGV[1] the page's entry: its simhash (8 bytes) then its fingerprint (20 bytes); '' if none
-- ARGV[2] entry size (28)
-- ARGV[3] entries a bucket keeps at most
-- ARGV[4] the page's body digest ('' if none)
-- ARGV[5] what the digest keeps of the page: fingerprint (hex), URL and fetch time, JSON
-- ARGV[6..5+n] the page's band values, one per band key
-- Returns {the first page of the digest when another page's (JSON) or '', then each bucket's
-- entries before the page was added}.
local entry, size, cap = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local out = {''}
if ARGV[4] ~= '' then
  local first = redis.call('HGET', KEYS[1], ARGV[4])
  if not first then
    redis.call('HSET', KEYS[1], ARGV[4], ARGV[5])
  elseif cjson.decode(first)['fingerprint'] ~= cjson.decode(ARGV[5])['fingerprint'] then
    out[1] = first
  end
end
if entry == '' then return out end
local me = string.sub(entry, 9)
for i = 2, #KEYS do
  local field = ARGV[4 + i]
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
