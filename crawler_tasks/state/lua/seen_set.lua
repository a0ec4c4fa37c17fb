-- Fragment of gate_complete.lua, the exact filter: a SET of fingerprints at KEYS[2]
-- (Keys.seen); a URL is admitted once, ever. Defines seen_test(fps) -> a boolean per
-- fingerprint and seen_add(fps); uses each_chunk of gate_complete.lua.
local function seen_test(fps)
  local r = {}
  each_chunk(fps, function(...)
    for _, m in ipairs(redis.call('SMISMEMBER', KEYS[2], ...)) do r[#r + 1] = m == 1 end
  end)
  return r
end
local function seen_add(fps)
  each_chunk(fps, function(...) redis.call('SADD', KEYS[2], ...) end)
end
