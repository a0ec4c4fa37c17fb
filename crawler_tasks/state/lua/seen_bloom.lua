-- Fragment of gate_complete.lua, the Bloom filter: a scalable, blocked Bloom filter on plain
-- Redis strings (crawler_tasks.state.seen explains its geometry). Defines seen_test(fps) ->
-- a boolean per fingerprint and seen_add(fps).
-- A filter is a HASH at its stem (geometry = "capacity/error rate" it was made for, slices,
-- n<i> = URLs in slice i) and strings of 64-byte blocks at Keys.bloom_segment(stem, slice,
-- segment). Each URL owns one block of each slice and sets k bits in it: a test is one
-- GETRANGE, an add one SETRANGE. The stem is KEYS[2] (Keys.bloom); with a recrawl window,
-- one filter per generation floor(now / window) at Keys.bloom_generation(KEYS[2], gen): a
-- URL is tested against this generation's and the last one's, added to this one's.
-- Generation and segment names are built here from the templates in P.templates, so they
-- are the names Python's key functions give (and in the slot of KEYS[2]).
-- P.id "capacity/error rate" · P.window recrawl window (s, 0 = none) · P.segment bytes per
-- string · P.geo per slice {blocks, hashes, capacity} · P.templates.generation and
-- P.templates.segment: keys.template of Keys.bloom_generation and Keys.bloom_segment.
-- include: keys.lua
local BLOCK = 64
local SEG = P.segment
local clock, gen = nil, nil
local stems = {KEYS[2]}
if P.window > 0 then
  clock = redis.call('TIME')
  gen = math.floor((tonumber(clock[1]) + tonumber(clock[2]) / 1e6) / P.window)
  local named = P.templates.generation
  stems = {key_of(named, KEYS[2], gen), key_of(named, KEYS[2], gen - 1)}
end
local bor, sbyte, schar, floor, call, sha1 = bit.bor, string.byte, string.char, math.floor, redis.call, redis.sha1hex
local HEX = setmetatable({}, {__index = function() return 0 end})
for i = 0, 9 do HEX[48 + i] = i end
for i = 0, 5 do HEX[97 + i] = 10 + i; HEX[65 + i] = 10 + i end
local MASK = {1, 2, 4, 8, 16, 32, 64, 128}
-- Where fp lies in a slice of `blocks` blocks: its block (the first 40 bits of the SHA1
-- fingerprint modulo the slice's size), and its k bits in that block (bit_of(j): byte
-- 1..64 and mask), each from its own next 12 bits (SHA1s of the digits extend them while
-- k needs more). Slices share the digits: their error rates add up whether or not
-- their false positives coincide, so the bound needs no independence between them.
local d = {}
local placed = {}  -- (slice * 2 + si) -> fp -> {block index, digits} of this call
local function place(fp, blocks, k, slice, si)
  local by = placed[slice * 2 + si]
  if not by then by = {}; placed[slice * 2 + si] = by end
  local hit = by[fp]
  if hit then d = hit[2]; return hit[1] end
  local digits = fp
  if #fp ~= 40 then digits = sha1(fp) end
  while #digits < 10 + 3 * k do digits = digits .. sha1(digits) end
  d = {sbyte(digits, 1, 10 + 3 * k)}
  local x = 0
  for i = 1, 10 do x = x * 16 + HEX[d[i]] end
  x = x % blocks
  by[fp] = {x, d}
  return x
end
-- Byte number and mask of bit j of the fingerprint last placed.
local function bit_of(j)
  local i = 8 + 3 * j
  local v = (HEX[d[i]] * 256 + HEX[d[i + 1]] * 16 + HEX[d[i + 2]]) % 512
  local low = v % 8
  return (v - low) / 8 + 1, MASK[low + 1]
end
local function load(stem)
  local v = call('HMGET', stem, 'geometry', 'slices')
  if not v[1] then return nil end
  if v[1] ~= P.id then
    error('bloom gate ' .. stem .. ' was made for capacity/error rate ' .. v[1] .. ', not ' .. P.id ..
      ': give every node the same CRAWLER_BLOOM_CAPACITY and CRAWLER_BLOOM_ERROR_RATE')
  end
  local meta = {slices = tonumber(v[2]), n = {}}
  local fields = {}
  for i = 0, meta.slices - 1 do fields[#fields + 1] = 'n' .. i end
  local counts = call('HMGET', stem, unpack(fields))
  for i = 0, meta.slices - 1 do meta.n[i] = tonumber(counts[i + 1] or '0') end
  return meta
end
-- Names of the strings of filter `si` (1 = this generation, 2 = the last), made once per call.
local names = {}
local function segment(si, slice, seg)
  local id = (seg * 16 + slice) * 2 + si
  local key = names[id]
  if not key then key = key_of(P.templates.segment, stems[si], slice, seg); names[id] = key end
  return key
end
-- Blocks read or written in this call.
local blocks = {}
local function read(si, slice, fp)
  local g = P.geo[slice + 1]
  local index = place(fp, g[1], g[2], slice, si)
  local seg = floor(index * BLOCK / SEG)
  local key, off, id = segment(si, slice, seg), index * BLOCK - seg * SEG, (index * 16 + slice) * 2 + si
  local block = blocks[id]
  if not block then
    block = call('GETRANGE', key, off, off + BLOCK - 1)
    blocks[id] = block
  end
  return block, g[2], key, off, id
end
local function has(si, slice, fp)
  local block, k = read(si, slice, fp)
  if #block == 0 then return false end
  for j = 1, k do
    local at, mask = bit_of(j)
    if (sbyte(block, at) or 0) % (mask * 2) < mask then return false end
  end
  return true
end
local function put(si, slice, fp)
  local block, k, key, off, id = read(si, slice, fp)
  local t = {sbyte(block, 1, BLOCK)}
  for i = #t + 1, BLOCK do t[i] = 0 end
  for j = 1, k do
    local at, mask = bit_of(j)
    t[at] = bor(t[at], mask)
  end
  block = schar(unpack(t))
  blocks[id] = block
  call('SETRANGE', key, off, block)
  return key
end
local function seen_test(fps)
  local r = {}
  for i = 1, #fps do r[i] = false end
  for si, stem in ipairs(stems) do
    local meta = load(stem)
    if meta then
      for slice = meta.slices - 1, 0, -1 do
        for i = 1, #fps do
          if not r[i] and has(si, slice, fps[i]) then r[i] = true end
        end
      end
    end
  end
  return r
end
local function seen_add(fps)
  if #fps == 0 then return end
  local stem = stems[1]
  local meta = load(stem) or {slices = 1, n = {[0] = 0}}
  local slice = meta.slices - 1
  local touched = {}
  for i = 1, #fps do
    if meta.n[slice] >= P.geo[slice + 1][3] then
      slice = slice + 1
      meta.n[slice] = 0
    end
    touched[put(1, slice, fps[i])] = true
    meta.n[slice] = meta.n[slice] + 1
  end
  local fields = {'geometry', P.id, 'slices', slice + 1}
  for i = 0, slice do fields[#fields + 1] = 'n' .. i; fields[#fields + 1] = meta.n[i] end
  call('HSET', stem, unpack(fields))
  if gen then
    local expiry = math.ceil((gen + 2) * P.window) + 1
    call('EXPIREAT', stem, expiry)
    for key in pairs(touched) do call('EXPIREAT', key, expiry) end
  end
end
