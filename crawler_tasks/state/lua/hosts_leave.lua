-- leave: waiting fetches that went on some other way leave a waiting room (a pause or a
-- cancel took them) or the mover's moving set (published): each removed one is counted out
-- of its crawl's waiting fetches.
-- KEYS[1] the ZSET they leave (Keys.host_wait of one host, or Keys.hosts_moving)
-- KEYS[2] the waiting fetches per crawl HASH (Keys.hosts_waiting_crawls)
-- ARGV: two values per fetch: its entry in KEYS[1], its crawl id.
-- Returns, per fetch, 1 when it was there (and is gone), else 0.
local out = {}
for i = 1, #ARGV, 2 do
  local gone = redis.call('ZREM', KEYS[1], ARGV[i])
  if gone == 1 and redis.call('HINCRBY', KEYS[2], ARGV[i + 1], -1) <= 0 then
    redis.call('HDEL', KEYS[2], ARGV[i + 1])
  end
  out[#out + 1] = gone
end
return out
