-- Fragment of gate_complete.lua, the exact filter with a recrawl window: a ZSET at KEYS[2]
-- (Keys.seen_recent), fingerprint -> admission time (Redis clock), trimmed past the window;
-- a URL passes again P.window seconds after its admission. Defines seen_test(fps) -> a
-- boolean per fingerprint and seen_add(fps); uses each_chunk of gate_complete.lua.
-- P.window: the recrawl window (s), CRAWLER_RECRAWL_AFTER.
-- include: now.lua
local horizon = now - P.window
local function seen_test(fps)
  local r = {}
  each_chunk(fps, function(...)
    for _, s in ipairs(redis.call('ZMSCORE', KEYS[2], ...)) do
      r[#r + 1] = (s and tonumber(s) > horizon) or false
    end
  end)
  return r
end
local function seen_add(fps)
  local args = {}
  for _, fp in ipairs(fps) do args[#args + 1] = now; args[#args + 1] = fp end
  each_chunk(args, function(...) redis.call('ZADD', KEYS[2], ...) end)
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', horizon)
end
