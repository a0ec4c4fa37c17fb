-- budget (a gate of several shards, a crawl with a page budget): how many of a completion's
-- new URLs the budget still takes, counted once per task (a redelivery gets the same answer).
-- KEYS[1] the crawl's own stats HASH (Keys.stats), where its gate/admitted is kept
-- KEYS[2] the crawl's grants HASH (Keys.grants)
-- ARGV[1] task id ('': seeds, nothing kept)
-- ARGV[2] new URLs the shards found (gated, first seen)
-- ARGV[3] candidates that bypass the filter, counted as admitted whatever the budget
-- ARGV[4] max pages
-- ARGV[5] replay TTL (s)
-- Returns how many of the new URLs are admitted (the first ones in the completion's order).
if ARGV[1] ~= '' then
  local granted = redis.call('HGET', KEYS[2], ARGV[1])
  if granted then return tonumber(granted) end
end
local new, bypass, limit = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local used = tonumber(redis.call('HGET', KEYS[1], 'gate/admitted') or '0')
local take = math.min(new, math.max(0, limit - used))
if take + bypass > 0 then redis.call('HINCRBY', KEYS[1], 'gate/admitted', take + bypass) end
if new > take then redis.call('HINCRBY', KEYS[1], 'gate/over_budget', new - take) end
if ARGV[1] ~= '' then
  redis.call('HSET', KEYS[2], ARGV[1], take)
  redis.call('EXPIRE', KEYS[2], ARGV[5])
end
return take
