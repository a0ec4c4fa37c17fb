-- broker_take: a worker of the Redis broker takes messages and notes them as unacked in one
-- step, where kombu takes with BRPOP and notes in a second round trip (a Redis killed in
-- between lost the message): up to ARGV[4] messages of the first list in order that holds
-- any, each noted as kombu writes it, and, when any list holds more and the wake list of its
-- queue is empty, a token there for the next waiting worker; when none holds more, the
-- tokens left on the wake lists are stale (their messages are taken) and go
-- (crawler_tasks.broker.transport).
-- KEYS[1] unacked, kombu's copies of the messages taken: tag -> [payload, exchange, routing key]
-- KEYS[2] unacked_index, their tags scored by when they were taken
-- KEYS[3 .. 2+n] the lists of the queues consumed, in the order to read them
-- KEYS[3+n .. 2+2n] the wake list of the queue of each of those lists (routing.wake_list)
-- ARGV[1] now, the worker's clock (kombu's restore sweep compares it with its own)
-- ARGV[2] 1 where the server has LMPOP (Redis 7), else 0
-- ARGV[3] for each list, 1 when its message is to be noted, 0 when its consumer acks nothing
-- ARGV[4] messages to take at most (the worker's free prefetch places)
-- Returns {list, how many of the lists still hold messages, then per message taken the
-- message and 1 when noted (else 0)}, or nil.
local n = (#KEYS - 2) / 2
local most = tonumber(ARGV[4]) or 1
local key, messages = nil, {}
if ARGV[2] == '1' then
  local args = {n}
  for i = 3, 2 + n do args[#args + 1] = KEYS[i] end
  args[#args + 1] = 'RIGHT'
  args[#args + 1] = 'COUNT'
  args[#args + 1] = most
  local popped = redis.call('LMPOP', unpack(args))
  if popped then key, messages = popped[1], popped[2] end
else
  for i = 3, 2 + n do
    local message = redis.call('RPOP', KEYS[i])
    if message then
      key, messages = KEYS[i], {message}
      while #messages < most do
        message = redis.call('RPOP', key)
        if not message then break end
        messages[#messages + 1] = message
      end
      break
    end
  end
end
if not key then return false end
local noted = false
for i = 3, 2 + n do
  if KEYS[i] == key then noted = string.sub(ARGV[3], i - 2, i - 2) == '1' break end
end
local out = {key, 0}
for _, message in ipairs(messages) do
  local tag = noted and string.match(message, '"delivery_tag"%s*:%s*"([^"]*)"')
  if tag then
    local ok, info = pcall(cjson.decode, string.match(message, '"delivery_info"%s*:%s*(%b{})') or '{}')
    if not ok or type(info) ~= 'table' then info = {} end
    redis.call('ZADD', KEYS[2], ARGV[1], tag)
    redis.call('HSET', KEYS[1], tag, '[' .. message .. ',' .. cjson.encode(info['exchange'] or '')
               .. ',' .. cjson.encode(info['routing_key'] or '') .. ']')
  end
  out[#out + 1] = message
  out[#out + 1] = tag and 1 or 0
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
out[2] = more
return out
