-- count_once: apply the counters of one step of a still-outstanding task (e.g. retry:2)
-- once; a redelivered message repeating the step counts nothing.
-- KEYS[1] the crawl's outstanding SET (Keys.outstanding)
-- KEYS[2] the task's replay HASH, where the step's mark goes (Keys.replay)
-- KEYS[3] the crawl's stats HASH (Keys.stats)
-- ARGV[1] task id
-- ARGV[2] the step's mark (a field of the replay HASH)
-- ARGV[3] TTL of the replay HASH (s)
-- ARGV[4..] (counter name, amount) pairs
-- Returns 1 when counted, 0 when not (the task left, or the step was counted before).
if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 0 then return 0 end
if redis.call('HSETNX', KEYS[2], ARGV[2], '1') == 0 then return 0 end
redis.call('EXPIRE', KEYS[2], ARGV[3])
for i = 4, #ARGV, 2 do redis.call('HINCRBY', KEYS[3], ARGV[i], ARGV[i + 1]) end
return 1
