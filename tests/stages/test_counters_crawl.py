"""Every counter a real crawl writes is in the registry (:mod:`crawler_tasks.core.counters`).

Real workers crawl a local site built to move as many counters as one crawl can:
robots.txt, redirects (followed and offsite), a 404, a 500 retried then given up,
duplicates, a page budget, too many and too long links, a truncated body, a 304
revalidation, a fetch another app sent, a store that is down (dead letters, then
replayed) and a seed feed with a malformed line. Then each crawl's stats hash and the
feed's status hash are read from Redis: every field must be a registered name or one
of a registered family.
"""

from __future__ import annotations

from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from crawler_tasks.cli.local import Workers, wait_drained
from crawler_tasks.core import counters, routing
from crawler_tasks.core.settings import Settings
from crawler_tasks.service.celery_app import create_app
from crawler_tasks.stages import feeds
from crawler_tasks.stages.dead_letters import replay_dead
from crawler_tasks.stages.runtime import Runtime
from crawler_tasks.stages.seed import build_requests, submit_requests
from tests.fakes.es_server import ESServer
from tests.fakes.site import Site, html, links
from tests.helpers import REDIS, flush, token

#: The broker and state database of these crawls.
COUNTERS_DB = 8
#: Fields of a feed's status hash that are not counters.
FEED_STATUS_FIELDS = {"last_tick", "last_outcome"}


class CounterSite(Site):
    """The test site with a robots.txt, a page that moves many counters and a page of many links."""

    def handle(self, h: BaseHTTPRequestHandler, head: bool = False) -> None:
        if h.path == "/robots.txt":
            return self.send(h, 200, b"User-agent: *\nDisallow: /private/\n", ctype="text/plain", head=head)
        return super().handle(h, head)

    def r_counters(self, h, segs, q, count, head):
        t = segs[0]
        self.send(h, 200, html("Counters", links(
            f"/counters/{t}",                                   # seen: a duplicate
            f"/private/{t}",                                    # robots.txt disallows it
            f"/nowhere/{t}",                                    # 404
            f"/broken/{t}",                                     # 500: retried, then given up
            f"/redirect/{t}/2",                                 # two redirects followed
            f"/goto?to=http://example.invalid/{t}",             # a redirect offsite
            f"/huge/{t}",                                       # truncated
            f"/many/{t}",                                       # more links than the cap
            f"/page/{t}-{'x' * 300}")), head=head)             # a link too long

    def r_many(self, h, segs, q, count, head):
        t = segs[0]
        self.send(h, 200, html("Many", links(*(f"/page/{t}-m{i}" for i in range(25)))), head=head)


@pytest.fixture
def counting(settings: Settings, tmp_path: Path) -> Iterator[tuple[Runtime, Workers, CounterSite, Path]]:
    """(runtime, workers, site, store path): workers that obey robots.txt, retry once, follow
    20 links per page, crawl URLs of at most 200 bytes, give a store up after one retry and
    revalidate what they stored (a recrawl window of an hour)."""
    flush(COUNTERS_DB)
    store = tmp_path / "pages.db"
    s = settings.replace(broker_url=f"{REDIS}/{COUNTERS_DB}", redis_url=f"{REDIS}/{COUNTERS_DB}",
                         key_prefix=f"counters{token()}", store=str(store), robotstxt_obey=True,
                         max_retries=1, max_links_per_page=20, max_url_length=200, store_max_retries=1,
                         recrawl_after=3600)
    site = CounterSite().start()
    workers = Workers(s, concurrency=4, name=f"counters{token()}@%h", log_path=str(tmp_path / "w.log")).start()
    rt = Runtime(s, create_app(s))
    yield rt, workers, site, store
    workers.stop()
    rt.close()
    site.stop()
    flush(COUNTERS_DB)


def test_every_counter_a_crawl_writes_is_registered(counting, tmp_path):
    rt, workers, site, store = counting
    t = token()

    def crawl(urls: list[str], crawl_id: str, *, max_pages: int | None = None, store_uri: str | None = None,
              **options: object) -> None:
        submit_requests(rt, build_requests(urls, crawl_id=crawl_id, **options), max_pages=max_pages,
                        store=store_uri or str(store))
        drained(crawl_id)

    def drained(crawl_id: str, also=lambda: True) -> None:
        wait_drained(lambda: also() and rt.crawls.outstanding(crawl_id) == 0, timeout=60, workers=workers)

    main, budget, dead, seeds = (f"{name}-{t}" for name in ("main", "budget", "dead", "seeds"))
    validated = f"{site.url}/validated/{t}"
    crawl([f"{site.url}/counters/{t}", validated], main)
    crawl([validated], main, dont_filter=True)  # revalidated: a 304 keeps the page
    [direct] = build_requests([f"{site.url}/page/{t}-direct"], crawl_id=main)
    rt.app.send_task(routing.FETCH_TASK, args=[direct.to_dict()], **routing.ROUTES[routing.FETCH_TASK])
    drained(main, lambda: rt.stats.read(main).get(counters.FETCH_DIRECT) == 1)

    crawl([f"{site.url}/counters/{t}-b"], budget, max_pages=2)

    with ESServer() as es:
        es.down()
        crawl([f"{site.url}/page/{t}-dead"], dead, store_uri=f"elasticsearch://{es.url.split('://', 1)[1]}/dead")
        es.up()
        assert replay_dead(rt, dead).written == 1

    seed_file = tmp_path / "seeds.txt"
    seed_file.write_text(f"{site.url}/page/{t}-seed\n{{not a seed\n")
    frt = Runtime(rt.settings.replace(seed_file=str(seed_file), seed_crawl_id=seeds), rt.app)
    frt.crawls.register(seeds, store=str(store))
    assert feeds.tick(frt, feeds.SEED_FILE).outcome == "fed"
    assert feeds.tick(frt, feeds.SEED_FILE).reason == "already_fed"
    drained(seeds)

    written: dict[str, set[str]] = {cid: set(rt.stats.read(cid)) for cid in (main, budget, dead, seeds)}
    unregistered = {cid: sorted(n for n in names if not counters.registered(n)) for cid, names in written.items()}
    assert not any(unregistered.values()), f"counters written but not registered: {unregistered}"
    feed_fields = {k.decode() for k in rt.redis.hkeys(rt.keys.feed(feeds.SEED_FILE))} - FEED_STATUS_FIELDS
    assert feed_fields and all(counters.registered(n, counters.FEED) for n in feed_fields), feed_fields

    # The crawl moved what it was built to move, so the check above means something.
    seen = {counters.find(n).name for names in written.values() for n in names}
    assert seen >= {
        counters.TOTAL_NUM, counters.TOTAL_REQUEST_SIZE, counters.TOTAL_RESPONSE_SIZE, counters.STATUS.name,
        counters.TRUNCATED, counters.NOT_MODIFIED, counters.RETRIES, counters.RETRY_REASON.name,
        counters.RETRY_MAX_REACHED.name, counters.FAILURES, counters.REDIRECTS, counters.REDIRECT_OFFSITE,
        counters.ROBOTS_DISALLOWED, counters.DUPLICATES, counters.GATE_ADMITTED, counters.GATE_OVER_BUDGET,
        counters.FETCH_DIRECT, counters.SEEDS_INVALID, counters.LINKS_OVER_CAP, counters.LINKS_TOO_LONG,
        counters.STORED, counters.STORE_RETRIES, counters.STORE_FAILED, counters.STORE_DEAD_LETTERS,
        counters.STORE_REPLAYED}, sorted(written[main])
    assert {counters.status(code) for code in (200, 304, 404, 500)} <= written[main]
    assert counters.retry_max_reached("http_500") in written[main]
    assert counters.feed_skipped("already_fed") in feed_fields
