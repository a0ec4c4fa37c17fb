-- abandon: a task that ended in an unexpected error leaves its crawl, counted once; the
-- children it admitted but never published leave the outstanding set with it.
-- KEYS[1] the crawl's outstanding SET (Keys.outstanding)
-- KEYS[2] the crawl's stats HASH (Keys.stats)
-- KEYS[3] the task's replay HASH (Keys.replay)
-- KEYS[4] the crawl's errors LIST (Keys.errors)
-- ARGV[1] task id
-- ARGV[2] error line
-- ARGV[3] n, the number of counters
-- ARGV[4..3+2n] n (counter name, amount) pairs
-- ARGV[4+2n..] ids of children admitted but never published
-- Returns 1, or 0 when the task had left already (nothing counted).
if redis.call('SREM', KEYS[1], ARGV[1]) == 0 then return 0 end
local last = 3 + 2 * tonumber(ARGV[3])
for i = 4, last, 2 do redis.call('HINCRBY', KEYS[2], ARGV[i], ARGV[i + 1]) end
local released = 0
for i = last + 1, #ARGV do released = released + redis.call('SREM', KEYS[1], ARGV[i]) end
if released > 0 then redis.call('HINCRBY', KEYS[2], 'gate/released', released) end
redis.call('DEL', KEYS[3])
redis.call('LPUSH', KEYS[4], ARGV[2])
redis.call('LTRIM', KEYS[4], 0, 99)
return 1
