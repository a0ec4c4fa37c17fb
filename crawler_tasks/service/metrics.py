"""Crawl-level Prometheus metrics, read from Redis at each scrape: one exporter serves
the whole cluster (``crawler-tasks metrics``).

A scrape costs a bounded number of round trips whatever the crawls hold: one
pipeline for every crawl's counters and outstanding set, two small commands per
crawl for its gate (``SCARD``/``ZCARD`` and a sampled ``MEMORY USAGE``), one pipeline
each for the crawls' states and held fetches, one ``HGETALL`` for the fetches waiting
per crawl (kept by the waiting rooms' scripts), one pipeline for the queue depths, and
the busiest of the 200 hosts last active (their waiting rooms by ``ZCARD``); never a
scan of a large key. With Redis away a scrape still answers, ``crawler_up`` 0. Host labels are the top
``top_hosts`` hosts only, so the label cardinality stays bounded.

Every counter read here is a name from :mod:`crawler_tasks.core.counters`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

import redis
from kombu.exceptions import OperationalError
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ..broker.queues import queue_depths
from ..core import counters, figures
from .control import CRAWL_STATES, crawl_state

if TYPE_CHECKING:
    from ..stages.runtime import Runtime

log = logging.getLogger(__name__)

#: Crawl counters exported as Prometheus counters: metric name -> (counter name, help).
SIMPLE: dict[str, tuple[str, str]] = {
    "crawler_retries": (counters.RETRIES, "retries scheduled"),
    "crawler_redirects": (counters.REDIRECTS, "redirects followed"),
    "crawler_robots_refused": (counters.ROBOTS_DISALLOWED, "URLs robots.txt disallowed"),
    "crawler_duplicates": (counters.DUPLICATES, "URLs the gate refused as seen before"),
    "crawler_stored": (counters.STORED, "records written"),
    "crawler_items": (counters.ITEMS, "items parse rules extracted that the pipelines kept"),
    "crawler_errors": (counters.ERRORS, "tasks or store writes ended by an unexpected error"),
    "crawler_rendered": (counters.RENDERED, "pages rendered in a browser"),
    "crawler_render_refused": (counters.RENDER_REFUSED, "requests of rendered pages refused"),
}


class CrawlCollector(Collector):
    """Reads the crawls' state from Redis on each scrape."""

    def __init__(self, rt: Runtime, *, top_hosts: int = 10) -> None:
        self.rt = rt
        self.top_hosts = top_hosts
        #: Seconds the last scrape took (also exported).
        self.last_seconds = 0.0

    def collect(self) -> Iterator[Metric]:
        """Every metric, read now; with Redis away, ``crawler_up`` 0 and the scrape's time
        only (the scrape still answers, so the alert on ``crawler_up`` fires)."""
        started = time.perf_counter()
        try:
            metrics = list(self._read())
        except (redis.RedisError, OperationalError, OSError) as exc:
            log.warning("metrics: Redis or the broker did not answer: %s", exc)
            metrics = []
        yield GaugeMetricFamily("crawler_up", "1 when the exporter read the crawler's state Redis "
                                "and broker at this scrape, 0 when one did not answer",
                                value=1 if metrics else 0)
        yield from metrics
        self.last_seconds = time.perf_counter() - started
        yield GaugeMetricFamily("crawler_scrape_seconds", "seconds the exporter took to read this scrape",
                                value=self.last_seconds)

    def _read(self) -> Iterator[Metric]:
        rt = self.rt
        ids = rt.crawls.all_ids()
        stats = rt.stats.read_many(ids)
        outstanding = rt.crawls.outstanding_many(ids)
        yield from self._per_crawl(ids, stats, outstanding)
        yield from self._backlog(ids)
        yield from self._gate(ids)
        yield from self._queues()
        yield from self._hosts()
        yield GaugeMetricFamily("crawler_dead_letters", "records waiting in the dead letters",
                                value=rt.dead_letters.count())
        depth = rt.store_queue.depth()
        store_queue = GaugeMetricFamily("crawler_store_queue", "records waiting for a store, by state",
                                        labels=["state"])
        for state, n in (("pending", depth.pending), ("delayed", depth.delayed), ("taken", depth.taken)):
            store_queue.add_metric([state], n)
        yield store_queue

    def _backlog(self, ids: list[str]) -> Iterator[Metric]:
        """Fetches waiting for their hosts (the backlog a polite crawl keeps out of the broker)
        and fetches held while their crawl is paused."""
        by_crawl = self.rt.hosts.waiting_by_crawl()
        held = self.rt.crawls.held_many(ids)
        waiting = GaugeMetricFamily("crawler_waiting", "fetches of the crawl waiting for their hosts "
                                    "(in the hosts' waiting rooms)", labels=["crawl"])
        paused = GaugeMetricFamily("crawler_held", "fetches of the crawl held while it is paused",
                                   labels=["crawl"])
        for cid in ids:
            waiting.add_metric([cid], by_crawl.get(cid, 0))
            paused.add_metric([cid], held.get(cid, 0))
        yield from (waiting, paused)
        yield GaugeMetricFamily("crawler_waiting_total", "fetches waiting for their hosts, every crawl",
                                value=sum(by_crawl.values()))

    def _per_crawl(self, ids: list[str], stats: dict[str, dict[str, int]],
                   outstanding: dict[str, int]) -> Iterator[Metric]:
        pages = CounterMetricFamily("crawler_pages", "responses per crawl and status class",
                                    labels=["crawl", "status_class"])
        volume = CounterMetricFamily("crawler_bytes", "bytes on the wire per crawl, in (responses) "
                                     "and out (requests)", labels=["crawl", "direction"])
        failures = CounterMetricFamily("crawler_failures", "failure records per crawl and reason "
                                       "(the last attempt's, `other` when none was retried)",
                                       labels=["crawl", "reason"])
        store_errors = CounterMetricFamily("crawler_store_errors", "records a store refused or whose "
                                           "store stayed down", labels=["crawl"])
        simple = {name: CounterMetricFamily(name, text, labels=["crawl"]) for name, (_, text) in SIMPLE.items()}
        left = GaugeMetricFamily("crawler_outstanding", "tasks of the crawl queued, running or waiting "
                                 "(what `crawler-tasks stats` shows as in_flight)", labels=["crawl"])
        state = GaugeMetricFamily("crawler_crawl_state", "1 for the crawl's state, 0 for the others "
                                  f"({', '.join(CRAWL_STATES)})", labels=["crawl", "state"])
        life = self.rt.crawls.standings(ids)
        for cid in ids:
            s = stats.get(cid, {})
            for key, n in figures.status_classes(s).items():
                pages.add_metric([cid, key], n)
            volume.add_metric([cid, "in"], s.get(counters.TOTAL_RESPONSE_SIZE, 0))
            volume.add_metric([cid, "out"], s.get(counters.TOTAL_REQUEST_SIZE, 0))
            for reason, n in figures.failure_reasons(s).items():
                failures.add_metric([cid, reason], n)
            store_errors.add_metric([cid], figures.store_errors(s))
            for name, (counter, _) in SIMPLE.items():
                simple[name].add_metric([cid], s.get(counter, 0))
            left.add_metric([cid], outstanding.get(cid, 0))
            now = crawl_state(life[cid].control, outstanding.get(cid, 0))
            for name in CRAWL_STATES:
                state.add_metric([cid, name], 1 if name == now else 0)
        yield from (pages, volume, failures, store_errors, *simple.values(), left, state)

    def _gate(self, ids: list[str]) -> Iterator[Metric]:
        items = GaugeMetricFamily("crawler_gate_items", "URLs the crawl's gate holds", labels=["crawl"])
        size = GaugeMetricFamily("crawler_gate_bytes", "bytes of the crawl's gate in Redis", labels=["crawl"])
        for cid in ids:
            info = self.rt.gate.info(cid)
            items.add_metric([cid], info.items)
            size.add_metric([cid], info.bytes)
        yield from (items, size)

    def _queues(self) -> Iterator[Metric]:
        depth = GaugeMetricFamily("crawler_queue_depth", "messages waiting in the broker, by queue and band "
                                  "(band 9 is served first)", labels=["queue", "band"])
        for queue, bands in queue_depths(self.rt.app, self.rt.settings).items():
            per_band = {k.removeprefix("band "): n for k, n in bands.items() if k != "total"}
            for band, n in (per_band or {"all": bands["total"]}).items():  # RabbitMQ tells totals only
                depth.add_metric([queue, band], n)
        yield depth

    def _hosts(self) -> Iterator[Metric]:
        busiest = self.rt.hosts.busiest(self.top_hosts)
        waiting = GaugeMetricFamily("crawler_host_waiting", f"fetches waiting in the host's waiting room "
                                    f"(the {self.top_hosts} busiest hosts)", labels=["host"])
        flying = GaugeMetricFamily("crawler_host_in_flight", "requests in flight to the host "
                                   f"(the {self.top_hosts} busiest hosts)", labels=["host"])
        delay = GaugeMetricFamily("crawler_host_delay_seconds", "the host's delay between requests, "
                                  f"back-off and AutoThrottle included (the {self.top_hosts} busiest hosts)",
                                  labels=["host"])
        backoff = GaugeMetricFamily("crawler_host_backoff_seconds", "the host's back-off delay after "
                                    f"429/503 answers, 0 when none (the {self.top_hosts} busiest hosts)",
                                    labels=["host"])
        for h in busiest:
            waiting.add_metric([h.host], h.waiting)
            flying.add_metric([h.host], h.in_flight)
            delay.add_metric([h.host], h.delay)
            backoff.add_metric([h.host], h.backoff)
        yield from (waiting, flying, delay, backoff)
        yield GaugeMetricFamily("crawler_in_flight", "requests in flight, over the busiest hosts",
                                value=sum(h.in_flight for h in busiest))

