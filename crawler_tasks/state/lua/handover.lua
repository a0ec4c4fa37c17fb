-- Fragment: waiting fetches handed to the broker from inside a script, when the broker is this
-- Redis. A waiting-room entry (Keys.host_wait) then carries its message: task id, crawl id,
-- band list, wake list and the message up to its delivery tag, tab-separated (waiting_room.carried);
-- the other form, task id TAB request JSON (waiting_room.member), carries none and goes through the
-- mover's publish. Needs now.lua and limits.lua first.
-- pace(hk, floor, conc, auto_on, start) -> next, delay, concurrency of a host whose waiting
-- fetches may be handed over: limits.lua's, the delay raised to the one the host keeps from
-- its latest fetch (a crawl's own delay or its robots.txt Crawl-delay).
local function pace(hk, floor, conc, auto_on, start)
  local nxt, delay, c = limits(hk, floor, conc, auto_on, start)
  local known = tonumber(redis.call('HGET', hk, 'delay'))
  if known and known > delay then delay = known end
  return nxt, delay, c
end
-- send(band, wake, message): the message onto its band list, a token on its queue's wake list
-- (crawler_tasks.broker.lists.wake_commands: one token, never more), once per script call.
local woken = {}
local function send(band, wake, message)
  redis.call('LPUSH', band, message)
  if not woken[wake] then
    redis.call('LPUSH', wake, 1)
    redis.call('LTRIM', wake, 0, 0)
    woken[wake] = true
  end
end
-- send_entry(entry, tag, tail) -> task id, crawl id of an entry that carries its message, sent
-- with delivery tag `task id.tag` (`tail` closes the message after its tag); nil (nothing sent)
-- for the other form.
local function send_entry(entry, tag, tail)
  local a = string.find(entry, '\t', 1, true)
  if string.sub(entry, a + 1, a + 1) == '{' then return nil end
  local b = string.find(entry, '\t', a + 1, true)
  local c = string.find(entry, '\t', b + 1, true)
  local d = string.find(entry, '\t', c + 1, true)
  local tid = string.sub(entry, 1, a - 1)
  send(string.sub(entry, b + 1, c - 1), string.sub(entry, c + 1, d - 1),
       string.sub(entry, d + 1) .. tid .. '.' .. tag .. tail)
  return tid, string.sub(entry, a + 1, b - 1)
end
-- hand_over(host, hk, sk, wk, due, moving, counts, free, delay, nxt, reserve, lease, tail, out):
-- the first `free` fetches waiting in the room `wk` of `host` (one when the host has a `delay`),
-- each with a slot reserved in `sk` for `reserve` seconds. With a `tail` (~= ''), one that
-- carries its message goes onto its band now and leaves its crawl's count in `counts`; the
-- others go into `moving` (a `lease` of seconds) and onto the list `out`, for the mover to
-- publish, or, with no `moving` (nil), stay for the mover. Then the host leaves `due` when its
-- room is empty (and its HASH `hk` loses `waiting`), else it is due when it may go next: `delay`
-- after `nxt` once a fetch went (now with no delay), else at `nxt`. An entry's arrival number
-- (its score's last 13 digits) is unique: its delivery tag. Returns how many went.
local function hand_over(host, hk, sk, wk, due, moving, counts, free, delay, nxt, reserve, lease, tail, out)
  if delay > 0 then free = 1 end
  local went = 0
  local first = redis.call('ZRANGE', wk, 0, free - 1, 'WITHSCORES')
  for i = 1, #first, 2 do
    local entry, score = first[i], first[i + 1]
    local tid, crawl = nil, nil
    if tail ~= '' then tid, crawl = send_entry(entry, string.format('%d', tonumber(score) % 1e13), tail) end
    if tid then
      if redis.call('HINCRBY', counts, crawl, -1) <= 0 then redis.call('HDEL', counts, crawl) end
    elseif moving then
      tid = string.sub(entry, 1, string.find(entry, '\t', 1, true) - 1)
      local m = host .. '\t' .. score .. '\t' .. entry
      redis.call('ZADD', moving, now + lease, m)
      out[#out + 1] = m
    else
      break
    end
    redis.call('ZREM', wk, entry)
    redis.call('ZADD', sk, now + reserve, tid)
    went = went + 1
  end
  if redis.call('EXISTS', wk) == 0 then
    redis.call('ZREM', due, host)
    redis.call('HDEL', hk, 'waiting')
  elseif went == 0 then redis.call('ZADD', due, math.max(now, nxt), host)
  elseif delay > 0 then redis.call('ZADD', due, math.max(now, nxt) + delay, host)
  else redis.call('ZADD', due, now, host) end
  return went
end
-- entry_crawl(entry) -> the crawl id of a waiting-room entry, of either form.
local function entry_crawl(entry)
  local a = string.find(entry, '\t', 1, true)
  if string.sub(entry, a + 1, a + 1) == '{' then return cjson.decode(string.sub(entry, a + 1)).crawl_id end
  return string.sub(entry, a + 1, string.find(entry, '\t', a + 1, true) - 1)
end
