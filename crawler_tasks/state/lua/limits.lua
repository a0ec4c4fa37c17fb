-- Fragment: limits(hk, floor, conc, auto_on, start) -> next, delay, concurrency of the host
-- whose HASH is `hk`: when its next request may start (Redis time, 0 if never), its
-- effective delay (the floor, i.e. the setting or Crawl-delay, raised by back-off and, with
-- auto_on == 1, by AutoThrottle starting at `start`), and its concurrency `conc` lowered by
-- the cut after timeouts (never below 1; 0 stays "no cap"). Needs no KEYS or ARGV.
local function limits(hk, floor, conc, auto_on, start)
  local h = redis.call('HMGET', hk, 'next', 'backoff', 'auto', 'cut')
  local delay = floor
  local b = tonumber(h[2]); if b and b > delay then delay = b end
  if auto_on == 1 then local a = tonumber(h[3]) or start; if a > delay then delay = a end end
  local cut = tonumber(h[4]) or 0
  if conc > 0 and cut > 0 then conc = math.max(1, conc - cut) end
  return tonumber(h[1]) or 0, delay, conc
end
