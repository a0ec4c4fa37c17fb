-- Fragment: replayed(key, fps) -> {'replay', then per fingerprint the task id the HASH at
-- key kept for it, or '-d'}: what a completion answered the first time (gate_complete.lua,
-- gate_part.lua). Uses each_chunk of the script that includes it. Needs no KEYS or ARGV.
local function replayed(key, fps)
  local out = {'replay'}
  each_chunk(fps, function(...)
    for _, tid in ipairs(redis.call('HMGET', key, ...)) do out[#out + 1] = tid or '-d' end
  end)
  return out
end
