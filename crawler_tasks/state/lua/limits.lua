-- Fragment: limits(hk, floor, conc, auto_on, start, own) -> next, delay, concurrency, requests,
-- waiting of the host whose HASH is `hk`: when its next request may start (Redis time, 0 if
-- never), its effective delay (the floor, i.e. the setting or Crawl-delay, raised by back-off
-- and, with auto_on == 1, by AutoThrottle starting at `start`), its concurrency `conc` lowered
-- by the cut after timeouts (never below 1; 0 stays "no cap"), the requests it has had, and
-- whether fetches wait in its waiting room (the field `waiting`, set by wait_in_room in
-- room.lua and cleared by the mover when it empties the room).
-- Unless `own` is true (a fetch that brings its crawl's concurrency), the concurrency the
-- host's latest fetch brought (the field `conc`, set by acquire) replaces `conc`.
-- Needs no KEYS or ARGV.
-- host_delay(floor, backoff, auto, auto_on, start) is that delay from the values themselves
-- (nil backoff or auto: none yet), for a script that holds them already.
local function host_delay(floor, backoff, auto, auto_on, start)
  local delay = floor
  if backoff and backoff > delay then delay = backoff end
  if auto_on == 1 then local a = auto or start; if a > delay then delay = a end end
  return delay
end
local function limits(hk, floor, conc, auto_on, start, own)
  local h = redis.call('HMGET', hk, 'next', 'backoff', 'auto', 'cut', 'requests', 'waiting', 'conc')
  local delay = host_delay(floor, tonumber(h[2]), tonumber(h[3]), auto_on, start)
  if not own and h[7] then conc = tonumber(h[7]) end
  local cut = tonumber(h[4]) or 0
  if conc > 0 and cut > 0 then conc = math.max(1, conc - cut) end
  return tonumber(h[1]) or 0, delay, conc, tonumber(h[5]) or 0, h[6] == '1'
end
