"""Scrapy on bench/broad's site: many seeds, one request at a time per host, a fixed delay.

    python -m scrapy_bench.broad --seeds seeds.txt --delay 1.0 --out report.json [--concurrency 256]

The spider of bench/compare (one small item per page, every link followed; the
pipeline only counts) with no offsite filter (every link of the site stays on
its hosts), ``DOWNLOAD_DELAY`` = ``--delay``, ``RANDOMIZE_DOWNLOAD_DELAY`` off,
``CONCURRENT_REQUESTS_PER_DOMAIN`` = 1 and ``CONCURRENT_REQUESTS`` = ``--concurrency``.
Run in bench/.venv-scrapy; writes the pipeline's report to ``--out`` when it closes.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from scrapy import Request, Spider
from scrapy.crawler import CrawlerProcess
from scrapy.settings import Settings

from scrapy_bench import settings as bench_settings
from scrapy_bench.spiders import FollowEverything


class BroadSpider(FollowEverything, Spider):
    """Every seed of ``seeds_file``; links to any host are followed."""

    name = "broad"

    def __init__(self, seeds_file: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.seeds = Path(seeds_file).read_text().split()

    async def start(self) -> AsyncIterator[Any]:
        self.started_at = time.time()
        for url in self.seeds:
            yield Request(url, callback=self.parse)


def build_settings(args: argparse.Namespace) -> Settings:
    """bench/compare's settings, made polite."""
    settings = Settings()
    settings.setmodule(bench_settings, priority="project")
    settings.setdict({"BENCH_OUT": args.out, "DOWNLOAD_DELAY": args.delay, "RANDOMIZE_DOWNLOAD_DELAY": False,
                      "CONCURRENT_REQUESTS_PER_DOMAIN": 1, "CONCURRENT_REQUESTS": args.concurrency,
                      "ROBOTSTXT_OBEY": args.robots},
                     priority="cmdline")
    return settings


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", required=True, help="file of seed URLs, one a line")
    parser.add_argument("--delay", type=float, required=True, help="DOWNLOAD_DELAY (seconds)")
    parser.add_argument("--concurrency", type=int, default=256, help="CONCURRENT_REQUESTS")
    parser.add_argument("--out", required=True, help="JSON report written when the spider closes")
    parser.add_argument("--robots", action="store_true", help="ROBOTSTXT_OBEY = True (Scrapy's project default)")
    args = parser.parse_args()
    process = CrawlerProcess(build_settings(args))
    process.crawl(BroadSpider, seeds_file=args.seeds)
    process.start()
    return 0


if __name__ == "__main__":
    sys.exit(main())
