"""Per-host politeness shared by every worker through Redis: the limiter and the waiting room.

A host is ``host:port`` (``example.com:443``): ``a.example.com`` and
``b.example.com`` have budgets of their own, as in Scrapy's downloader slots.

``acquire``  before a download: the fetch may go when fewer than
             ``CRAWLER_HOST_CONCURRENCY`` requests to its host are in flight
             cluster-wide, ``CRAWLER_DOWNLOAD_DELAY`` (or a larger delay:
             robots.txt ``Crawl-delay``, back-off, AutoThrottle) has passed since
             the host's last request started, and no earlier fetch of the host
             waits. It then holds a slot (a lease, so a SIGKILLed worker's slot
             frees itself) until ``release``.
``park``     a fetch that may not go yet leaves the broker: its request joins the
             host's ``wait`` ZSET (ordered by band, then arrival) and the host is
             scheduled in ``due``. Its message is acknowledged, so no worker holds
             it, it is not an ETA message, and no retry is used.
``release``  after the download: frees the slot and feeds the response back
             (429/503 and ``Retry-After`` raise the host's delay, successes relax
             it, timeouts cut its concurrency, AutoThrottle follows the latency).
``take_due`` (the mover, :mod:`crawler_tasks.stages.mover`) hands the waiting fetches of
             hosts that may go now back to the broker, in their own band, one per
             delay (or as many as free slots when the delay is 0), each with a
             slot reserved for it; handed-over entries sit in ``moving`` until
             published, so a mover killed half-way loses nothing.

Every key has the hash tag ``{hosts}``: one slot of a Redis Cluster, so each
script runs atomically there (the mover's script names the host keys it
visits itself, which Redis Cluster allows within the slot).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import redis

from ..core import counters, routing
from ..core.models import CrawlRequest
from ..core.politeness import Feedback, Slot
from ..core.settings import Settings
from .keys import Keys

#: Seconds a host's state outlives its last request.
HOST_TTL = 86400
#: Seconds a slot stays reserved for a fetch the mover handed to the broker.
RESERVE_S = 60.0
#: Seconds a mover has to publish what it took before another mover takes it back.
MOVE_LEASE_S = 30.0
#: Hosts the mover looks at per call, at most.
DUE_BATCH = 100
#: Fetches released at once to a host with no delay and no concurrency cap.
UNCAPPED_BATCH = 64
#: Hosts the ``recent`` list keeps (``stats`` shows the busiest of its newest 200). It is
#: trimmed to this many once it is a tenth over: at most 11,000 entries, about 1 MB.
RECENT_HOSTS = 10_000


@dataclass(frozen=True)
class HostState:
    """One host as ``crawler-tasks stats`` shows it."""

    host: str
    delay: float
    in_flight: int
    waiting: int
    requests: int
    deferred: int
    throttled: int
    blocked: int
    proxied: bool
    backoff: float
    concurrency_cut: int

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


_NOW = "local t = redis.call('TIME'); local now = t[1] + t[2] / 1e6\n"

# Add a host to the recent list; drop the oldest once it is a tenth over ``keep`` (so the
# trim runs once per keep/10 new hosts, not on every call).
_RECENT = """
local function note_recent(key, now, host, keep)
  redis.call('ZADD', key, now, host)
  if redis.call('ZCARD', key) > keep + math.floor(keep / 10) then
    redis.call('ZREMRANGEBYRANK', key, 0, -(keep + 1))
  end
end
"""

# The effective delay and concurrency of a host: the floor (setting or Crawl-delay), raised by
# back-off and AutoThrottle, the concurrency cut after timeouts.
_LIMITS = """
local function limits(hk, floor, conc, auto_on, start)
  local h = redis.call('HMGET', hk, 'next', 'backoff', 'auto', 'cut')
  local delay = floor
  local b = tonumber(h[2]); if b and b > delay then delay = b end
  if auto_on == 1 then local a = tonumber(h[3]) or start; if a > delay then delay = a end end
  local cut = tonumber(h[4]) or 0
  if conc > 0 and cut > 0 then conc = math.max(1, conc - cut) end
  return tonumber(h[1]) or 0, delay, conc
end
"""

# KEYS[1] host · KEYS[2] slots · KEYS[3] wait · KEYS[4] recent · KEYS[5] benched proxies
# ARGV[1] task id · ARGV[2] delay floor · ARGV[3] concurrency (0 = no cap) · ARGV[4] '1' AutoThrottle
# ARGV[5] slot lease (s) · ARGV[6] host name · ARGV[7] state TTL (s) · ARGV[8] proxies configured
# ARGV[9] AutoThrottle start delay · ARGV[10] recent hosts kept
_ACQUIRE = _NOW + _LIMITS + _RECENT + """
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local nxt, delay, conc = limits(KEYS[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]),
                               tonumber(ARGV[9]))
local held = redis.call('ZSCORE', KEYS[2], ARGV[1])
if not held then
  if redis.call('EXISTS', KEYS[3]) == 1 then return {0, tostring(math.max(now, nxt))} end
  if conc > 0 and redis.call('ZCARD', KEYS[2]) >= conc then return {0, tostring(now)} end
end
if now < nxt then
  if held then redis.call('ZREM', KEYS[2], ARGV[1]) end
  return {0, tostring(nxt)}
end
local proxy, n = -1, tonumber(ARGV[8])
if n > 0 and redis.call('HGET', KEYS[1], 'proxied') == '1' then
  -- the next proxy in turn for this host, skipping benched ones
  local seq, soonest = redis.call('HINCRBY', KEYS[1], 'pseq', 1), nil
  for k = 0, n - 1 do
    local i = (seq + k) % n
    local benched = tonumber(redis.call('ZSCORE', KEYS[5], i))
    if not benched or benched <= now then proxy = i; break end
    if not soonest or benched < soonest then soonest = benched end
  end
  if proxy < 0 then
    if held then redis.call('ZREM', KEYS[2], ARGV[1]) end
    return {0, tostring(soonest)}
  end
end
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[5]), ARGV[1])
redis.call('HSET', KEYS[1], 'next', tostring(now + delay), 'delay', tostring(delay))
if redis.call('HINCRBY', KEYS[1], 'requests', 1) % 32 == 1 then
  -- now and then, not on every request: keep the state alive and the host in the recent list
  redis.call('EXPIRE', KEYS[1], ARGV[7])
  redis.call('EXPIRE', KEYS[2], ARGV[7])
  note_recent(KEYS[4], now, ARGV[6], tonumber(ARGV[10]))
end
return {1, tostring(delay), proxy}
"""

# KEYS[1] host · KEYS[2] wait · KEYS[3] due · KEYS[4] recent · KEYS[5] slots · KEYS[6] arrivals
# ARGV[1] member · ARGV[2] score (band rank) · ARGV[3] earliest time (Redis) · ARGV[4] host name
# ARGV[5] state TTL · ARGV[6] task id · ARGV[7] recent hosts kept
_PARK = _NOW + _RECENT + """
redis.call('ZREM', KEYS[5], ARGV[6])  -- a waiting fetch holds no slot, reserved or not
local score = tonumber(ARGV[2]) * 1e13 + redis.call('INCR', KEYS[6]) % 1e13
redis.call('ZADD', KEYS[2], 'NX', score, ARGV[1])
local at = math.max(tonumber(ARGV[3]), tonumber(redis.call('HGET', KEYS[1], 'next') or '0'))
local cur = tonumber(redis.call('ZSCORE', KEYS[3], ARGV[4]))
if not cur or at < cur then redis.call('ZADD', KEYS[3], at, ARGV[4]) end
redis.call('HINCRBY', KEYS[1], 'deferred', 1)
redis.call('EXPIRE', KEYS[1], ARGV[5])
note_recent(KEYS[4], now, ARGV[4], tonumber(ARGV[7]))
return 1
"""

# KEYS[1] host · KEYS[2] slots · KEYS[3] wait · KEYS[4] due · KEYS[5] benched proxies
# ARGV[1] task id · ARGV[2] kind · ARGV[3] status · ARGV[4] Retry-After (s, -1 none)
# ARGV[5] latency (s, -1 none) · ARGV[6] delay floor · ARGV[7] back-off cap (s)
# ARGV[8] '1' AutoThrottle · ARGV[9] target concurrency · ARGV[10] AutoThrottle max delay
# ARGV[11] AutoThrottle start delay · ARGV[12] host name · ARGV[13] ban threshold
# ARGV[14] proxies configured · ARGV[15] proxy used (-1 direct) · ARGV[16] proxy bench (s)
# Returns 1 when the host goes through proxies.
_RELEASE = _NOW + """
redis.call('ZREM', KEYS[2], ARGV[1])
local kind, floor = ARGV[2], tonumber(ARGV[6])
local h = redis.call('HMGET', KEYS[1], 'next', 'backoff', 'strikes', 'cut', 'good', 'auto', 'ban', 'proxied')
local nxt, b = tonumber(h[1]) or 0, tonumber(h[2]) or 0
local strikes, cut, good = tonumber(h[3]) or 0, tonumber(h[4]) or 0, tonumber(h[5]) or 0
if kind == 'throttled' then
  b = math.min(math.max(b * 2, floor * 2, 1), tonumber(ARGV[7]))
  local ra = tonumber(ARGV[4])
  local pause = b
  if ra >= 0 then pause = math.min(ra, tonumber(ARGV[7])) end
  if now + pause > nxt then nxt = now + pause end
  redis.call('HSET', KEYS[1], 'backoff', tostring(b), 'next', tostring(nxt))
  redis.call('HINCRBY', KEYS[1], 'throttled', 1)
elseif kind == 'timeout' then
  strikes = strikes + 1
  if strikes >= 3 then cut = cut + 1; strikes = 0 end
  redis.call('HSET', KEYS[1], 'strikes', strikes, 'cut', cut, 'good', 0)
elseif kind == 'ok' then
  if b > 0 then
    b = b / 2
    if b <= floor or b < 0.05 then redis.call('HDEL', KEYS[1], 'backoff')
    else redis.call('HSET', KEYS[1], 'backoff', tostring(b)) end
  end
  if cut > 0 then
    good = good + 1
    if good >= 10 then cut = cut - 1; good = 0 end
    redis.call('HSET', KEYS[1], 'strikes', 0, 'cut', cut, 'good', good)
  elseif strikes > 0 then
    redis.call('HSET', KEYS[1], 'strikes', 0)
  end
end
local latency = tonumber(ARGV[5])
if ARGV[8] == '1' and latency >= 0 and kind ~= 'timeout' then
  -- Scrapy's AutoThrottle: move half-way towards latency / target concurrency.
  local cur = tonumber(h[6]) or math.max(floor, tonumber(ARGV[11]))
  local target = latency / tonumber(ARGV[9])
  local new = math.max(target, (cur + target) / 2)
  new = math.min(math.max(floor, new), tonumber(ARGV[10]))
  if ARGV[3] == '200' or new > cur then redis.call('HSET', KEYS[1], 'auto', tostring(new)) end
end
if redis.call('EXISTS', KEYS[3]) == 1 then
  redis.call('ZADD', KEYS[4], math.max(now, nxt), ARGV[12])
end
local ban, proxied = tonumber(h[7]) or 0, h[8] == '1'
if kind == 'blocked' or kind == 'throttled' then
  ban = ban + 1
  redis.call('HSET', KEYS[1], 'ban', ban)
  if kind == 'blocked' then redis.call('HINCRBY', KEYS[1], 'blocked', 1) end
  if tonumber(ARGV[14]) > 0 and ban >= tonumber(ARGV[13]) then
    redis.call('HSET', KEYS[1], 'proxied', 1)
    proxied = true
  end
elseif kind == 'ok' and tonumber(ARGV[3]) < 400 and ban > 0 then
  redis.call('HSET', KEYS[1], 'ban', 0)
end
if kind == 'proxy' and tonumber(ARGV[15]) >= 0 then
  redis.call('ZADD', KEYS[5], now + tonumber(ARGV[16]), ARGV[15])
end
if proxied and tonumber(ARGV[14]) > 0 then return 1 end
return 0
"""

# KEYS[1] due · KEYS[2] moving
# ARGV[1] key stem (``<prefix>:{hosts}:``) · ARGV[2] hosts per call · ARGV[3] delay floor
# ARGV[4] concurrency · ARGV[5] '1' AutoThrottle · ARGV[6] reservation (s) · ARGV[7] move lease (s)
# ARGV[8] batch when uncapped · ARGV[9] AutoThrottle start delay
_TAKE_DUE = _NOW + _LIMITS + """
local P = ARGV[1]
for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, 100)) do
  local a = string.find(m, '\\t', 1, true)
  local b = string.find(m, '\\t', a + 1, true)
  local host = string.sub(m, 1, a - 1)
  redis.call('ZADD', P .. 'wait:' .. host, 'NX', string.sub(m, a + 1, b - 1), string.sub(m, b + 1))
  redis.call('ZADD', KEYS[1], now, host)
  redis.call('ZREM', KEYS[2], m)
end
local out = {}
for _, host in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[2]))) do
  local hk, sk, wk = P .. 'host:' .. host, P .. 'slots:' .. host, P .. 'wait:' .. host
  redis.call('ZREMRANGEBYSCORE', sk, '-inf', now)
  local nxt, delay, conc = limits(hk, tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]),
                                 tonumber(ARGV[9]))
  local known = tonumber(redis.call('HGET', hk, 'delay'))
  if known and known > delay then delay = known end
  if redis.call('EXISTS', wk) == 0 then
    redis.call('ZREM', KEYS[1], host)
  elseif now < nxt then
    redis.call('ZADD', KEYS[1], nxt, host)
  else
    local free = tonumber(ARGV[8])
    if conc > 0 then free = conc - redis.call('ZCARD', sk) end
    if free <= 0 then
      local first = redis.call('ZRANGE', sk, 0, 0, 'WITHSCORES')
      redis.call('ZADD', KEYS[1], tonumber(first[2]), host)
    else
      if delay > 0 then free = 1 end
      local popped = redis.call('ZPOPMIN', wk, free)
      for i = 1, #popped, 2 do
        local member = popped[i]
        local tid = string.sub(member, 1, string.find(member, '\\t', 1, true) - 1)
        redis.call('ZADD', sk, now + tonumber(ARGV[6]), tid)
        local m = host .. '\\t' .. popped[i + 1] .. '\\t' .. member
        redis.call('ZADD', KEYS[2], now + tonumber(ARGV[7]), m)
        out[#out + 1] = m
      end
      if redis.call('EXISTS', wk) == 0 then redis.call('ZREM', KEYS[1], host)
      elseif delay > 0 then redis.call('ZADD', KEYS[1], now + delay, host)
      else redis.call('ZADD', KEYS[1], now, host) end
    end
  end
end
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local wait = -1
if first[2] then wait = math.max(0, tonumber(first[2]) - now) end
table.insert(out, 1, tostring(wait))
return out
"""


@dataclass(frozen=True)
class Moved:
    """A waiting fetch the mover took: publish ``request`` as ``task_id``, then :meth:`HostLimiter.moved`."""

    member: str
    task_id: str
    request: CrawlRequest


class HostLimiter:
    """Per-host delay, concurrency and waiting fetches, kept in Redis (see the module doc)."""

    def __init__(self, client: redis.Redis, keys: Keys, settings: Settings) -> None:
        self.redis = client
        self.keys = keys
        self.settings = settings
        #: Hosts the ``recent`` list keeps (:data:`RECENT_HOSTS`).
        self.recent_hosts = RECENT_HOSTS
        self._acquire = client.register_script(_ACQUIRE)
        self._park = client.register_script(_PARK)
        self._release = client.register_script(_RELEASE)
        self._take_due = client.register_script(_TAKE_DUE)

    def _floor(self, crawl_delay: float | None) -> float:
        return max(self.settings.download_delay, crawl_delay or 0.0)

    @property
    def _auto(self) -> int:
        return 1 if self.settings.autothrottle else 0

    def acquire(self, host: str, task_id: str, *, crawl_delay: float | None = None) -> Slot:
        """Take a slot of ``host`` for task ``task_id`` now, or say until when it must wait."""
        k, s = self.keys, self.settings
        answer = self._acquire(
            keys=[k.host(host), k.host_slots(host), k.host_wait(host), k.hosts_recent(),
                  k.proxies_benched()],
            args=[task_id, self._floor(crawl_delay), s.host_concurrency, self._auto,
                  self.slot_lease, host, HOST_TTL, len(s.proxies), s.autothrottle_start_delay,
                  self.recent_hosts])
        if not int(answer[0]):
            return Slot(False, float(answer[1]))
        proxy = int(answer[2])
        return Slot(True, proxy=None if proxy < 0 else proxy)

    @property
    def slot_lease(self) -> float:
        """Seconds a slot outlives its holder's last sign: one download, with room to spare."""
        return self.settings.download_timeout * 2 + 30

    def park(self, host: str, task_id: str, request: CrawlRequest, until: float) -> None:
        """Keep ``request`` (task ``task_id``) waiting for ``host`` in Redis, in its band."""
        k = self.keys
        rank = routing.MAX_BAND - routing.band(request.priority)
        self._park(keys=[k.host(host), k.host_wait(host), k.hosts_due(), k.hosts_recent(),
                         k.host_slots(host), k.hosts_arrivals()],
                   args=[member(task_id, request), rank, until, host, HOST_TTL, task_id,
                         self.recent_hosts])

    def release(self, host: str, task_id: str, feedback: Feedback, *,
                crawl_delay: float | None = None, pipe: Any = None) -> bool:
        """Free the slot of task ``task_id`` and adapt ``host``'s limits to ``feedback``;
        True when the host now goes through the proxies (``pipe``: queued there, False)."""
        k, s = self.keys, self.settings
        keys = [k.host(host), k.host_slots(host), k.host_wait(host), k.hosts_due(), k.proxies_benched()]
        args = [task_id, feedback.kind, feedback.status,
                -1 if feedback.retry_after is None else feedback.retry_after,
                feedback.latency, self._floor(crawl_delay), s.retry_backoff_max, self._auto,
                s.autothrottle_target_concurrency, s.autothrottle_max_delay,
                s.autothrottle_start_delay, host, s.ban_threshold, len(s.proxies),
                -1 if feedback.proxy is None else feedback.proxy, s.proxy_bench_s]
        if pipe is not None:
            # EVAL, not a Script: a pipeline holding a Script first asks Redis whether it is
            # loaded (a round trip more); Redis caches the compiled script by its digest.
            pipe.eval(_RELEASE, len(keys), *keys, *args)
            return False
        return bool(self._release(keys=keys, args=args))

    def take_due(self, limit: int = DUE_BATCH) -> tuple[list[Moved], float | None]:
        """Waiting fetches whose host may go now (each with a slot reserved), and seconds
        until the next host is due (None: nothing waits)."""
        k, s = self.keys, self.settings
        raw = self._take_due(keys=[k.hosts_due(), k.hosts_moving()],
                             args=[k.hosts_stem(), limit, s.download_delay, s.host_concurrency,
                                   self._auto, RESERVE_S, MOVE_LEASE_S, UNCAPPED_BATCH,
                                   s.autothrottle_start_delay])
        wait = float(raw[0])
        out = []
        for m in raw[1:]:
            text = m.decode() if isinstance(m, bytes) else m
            _, _, entry = text.split("\t", 2)
            task_id, data = entry.split("\t", 1)
            out.append(Moved(text, task_id, CrawlRequest.from_dict(json.loads(data))))
        return out, (None if wait < 0 else wait)

    def moved(self, members: Sequence[str]) -> None:
        """Forget fetches the mover published."""
        if members:
            self.redis.zrem(self.keys.hosts_moving(), *members)

    def waiting(self) -> int:
        """Fetches waiting for their host, over every host (walks the due hosts)."""
        hosts = self.redis.zrange(self.keys.hosts_due(), 0, -1)
        with self.redis.pipeline(transaction=False) as pipe:
            for h in hosts:
                pipe.zcard(self.keys.host_wait(h.decode()))
            counts = pipe.execute()
        return sum(counts) + self.redis.zcard(self.keys.hosts_moving())

    def busiest(self, n: int = 10, recent: int = 200) -> list[HostState]:
        """The ``n`` busiest of the ``recent`` hosts last active: most waiting, then in flight."""
        hosts = [h.decode() for h in self.redis.zrevrange(self.keys.hosts_recent(), 0, recent - 1)]
        with self.redis.pipeline(transaction=False) as pipe:
            for h in hosts:
                pipe.hgetall(self.keys.host(h))
                pipe.zcard(self.keys.host_slots(h))
                pipe.zcard(self.keys.host_wait(h))
            raw = pipe.execute()
        states = [self._state(h, raw[3 * i], raw[3 * i + 1], raw[3 * i + 2]) for i, h in enumerate(hosts)]
        states.sort(key=lambda st: (st.waiting, st.in_flight, st.requests), reverse=True)
        return states[:n]

    def _state(self, host: str, fields: dict[bytes, bytes], slots: int, waiting: int) -> HostState:
        f = {key.decode(): value.decode() for key, value in fields.items()}
        return HostState(host=host, delay=float(f.get("delay", self.settings.download_delay)),
                         in_flight=slots, waiting=waiting, requests=int(f.get(counters.HOST_REQUESTS, 0)),
                         deferred=int(f.get(counters.HOST_DEFERRED, 0)),
                         throttled=int(f.get(counters.HOST_THROTTLED, 0)),
                         blocked=int(f.get(counters.HOST_BLOCKED, 0)), proxied=f.get("proxied") == "1",
                         backoff=float(f.get("backoff", 0)), concurrency_cut=int(f.get("cut", 0)))


def member(task_id: str, request: CrawlRequest) -> str:
    """The waiting-room entry of a fetch: the same text for the same fetch (so a
    redelivered park does not add it twice)."""
    return f"{task_id}\t{json.dumps(request.to_dict(), sort_keys=True, separators=(',', ':'))}"
