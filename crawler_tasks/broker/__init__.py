"""Everything that speaks the broker's protocol: messages, lists, pushes, takes, the transport.

Celery and kombu carry the crawl on any broker. On a Redis broker (the default,
and the quick start's one Redis for broker and state) this package replaces
some of kombu's Redis transport, each for a figure in ``bench/RESULTS.md``:

- **The take and its note in one step** (:mod:`.transport`, the script
  ``state/lua/broker_take.lua``). kombu takes a message with ``BRPOP`` and notes it
  as unacked in a second round trip; a Redis killed between the two loses the
  message. Under disk load 1 restart in 8 lost a page with kombu's take, none in
  16 with the script. A take brings as many messages of its first band as the
  worker's prefetch has room for: with Redis 5 ms away a worker did 320 pages/s
  where one message a round trip held it to 147 (``bench/distance``).
- **Wake lists** (:mod:`.lists`). A script cannot block: a worker whose take found
  nothing blocks on its queues' wake lists, and whoever pushes a message pushes a
  token there, so an idle worker wakes at once. A message sent by stock kombu
  (no token) is taken within ``brpop_timeout`` (1 s).
- **In-band acks** (:func:`.acks.in_band_ack`). A fetch's ack joins its page's
  last MULTI/EXEC with the record, the children and the host slot's release; with
  one Redis client per channel instead of one per command, round trips per page
  went from 7.3 to 5.2 and CPU per page to 0.84×.
- **Bands only where bands exist** (:meth:`.transport.Channel._q_for_pri`). kombu
  keeps ten lists per queue; only ``crawl.fetch`` and ``crawl.render`` have bands,
  so a take names 14 lists instead of 50. Acks go without MULTI/EXEC (the copy is
  deleted before its index entry, so a cut-short ack leaves nothing to restore).
  Together with the other steps of that round: 47.2 to 37.9 Redis commands per page.
- **Lean fetch messages, pushed in bulk** (:mod:`.messages`, :mod:`.fetch_queue`).
  A page's children go out as protocol-2 messages of 440 bytes instead of 1.1 KB,
  one ``LPUSH`` per band inside the page's last round trip, instead of one
  ``send_task`` (half a millisecond of CPU, one round trip) each.

The transport overrides private kombu methods; ``pyproject.toml`` pins kombu and
Celery to the minor versions tested, and ``tests/broker/test_kombu_surface.py``
names any method whose signature or source changed. With RabbitMQ none of this
applies: fetches go through Celery as they are, and :mod:`.queues` reads a queue's
depth with a passive declare.

The Lua script lives with the package's other scripts (``state/lua``): one loader,
one include syntax and one header test for all of them.
"""
