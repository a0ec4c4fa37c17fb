-- Fragment: note_recent(key, now, host, keep) adds `host` at `now` to the ZSET `key` of the
-- hosts last active; once it holds a tenth more than `keep`, the oldest go (so the trim
-- runs once per keep/10 new hosts, not on every call). Needs no KEYS or ARGV.
local function note_recent(key, now, host, keep)
  redis.call('ZADD', key, now, host)
  if redis.call('ZCARD', key) > keep + math.floor(keep / 10) then
    redis.call('ZREMRANGEBYRANK', key, 0, -(keep + 1))
  end
end
