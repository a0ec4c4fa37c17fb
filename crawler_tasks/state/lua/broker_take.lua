-- broker_take: a worker of the Redis broker takes a message and notes it as unacked in one
-- step, where kombu takes with BRPOP and notes in a second round trip (a Redis killed in
-- between lost the message): the first message of the lists in order, its note as kombu
-- writes it, and, when any list holds more and the wake list of its queue is empty, a token
-- there for the next waiting worker; when none holds more, the tokens left on the wake lists
-- are stale (their messages are taken) and go (crawler_tasks.broker.transport).
-- KEYS[1] unacked, kombu's copies of the messages taken: tag -> [payload, exchange, routing key]
-- KEYS[2] unacked_index, their tags scored by when they were taken
-- KEYS[3 .. 2+n] the lists of the queues consumed, in the order to read them
-- KEYS[3+n .. 2+2n] the wake list of the queue of each of those lists (routing.wake_list)
-- ARGV[1] now, the worker's clock (kombu's restore sweep compares it with its own)
-- ARGV[2] 1 where the server has LMPOP (Redis 7), else 0
-- ARGV[3] for each list, 1 when its message is to be noted, 0 when its consumer acks nothing
-- Returns {list, message, how many of the lists still hold messages, 1 when noted}, or nil.
local n = (#KEYS - 2) / 2
local key, message
if ARGV[2] == '1' then
  local args = {n}
  for i = 3, 2 + n do args[#args + 1] = KEYS[i] end
  args[#args + 1] = 'RIGHT'
  local popped = redis.call('LMPOP', unpack(args))
  if popped then key, message = popped[1], popped[2][1] end
else
  for i = 3, 2 + n do
    message = redis.call('RPOP', KEYS[i])
    if message then key = KEYS[i] break end
  end
end
if not message then return false end
local noted = false
for i = 3, 2 + n do
  if KEYS[i] == key then noted = string.sub(ARGV[3], i - 2, i - 2) == '1' break end
end
local tag = noted and string.match(message, '"delivery_tag"%s*:%s*"([^"]*)"')
if tag then
  local ok, info = pcall(cjson.decode, string.match(message, '"delivery_info"%s*:%s*(%b{})') or '{}')
  if not ok or type(info) ~= 'table' then info = {} end
  redis.call('ZADD', KEYS[2], ARGV[1], tag)
  redis.call('HSET', KEYS[1], tag, '[' .. message .. ',' .. cjson.encode(info['exchange'] or '')
             .. ',' .. cjson.encode(info['routing_key'] or '') .. ']')
end
local more = redis.call('EXISTS', unpack(KEYS, 3, 2 + n))
if more > 0 then
  for i = 3, 2 + n do
    if KEYS[i] == key then
      if redis.call('EXISTS', KEYS[i + n]) == 0 then redis.call('LPUSH', KEYS[i + n], 1) end
      break
    end
  end
else
  redis.call('DEL', unpack(KEYS, 3 + n, 2 + 2 * n))
end
return {key, message, more, tag and 1 or 0}
