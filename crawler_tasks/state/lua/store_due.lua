-- Fragment: `batch_due`, whether a store batch is due: the pending list holds a full batch (n), its
-- oldest entry waited the flush time, or nothing arrived since the last look (nobody is
-- adding to it: no batch is coming). Notes when the list was first seen non-empty and
-- its length at this look. Needs now.lua.
local function batch_due(len, since_key, looked_key, n, flush_s)
  local since = tonumber(redis.call('GET', since_key))
  if not since then
    since = now
    redis.call('SET', since_key, now)
  end
  local before = tonumber(redis.call('GETSET', looked_key, len))
  return len >= n or before == len or now - since >= flush_s
end
