"""Run one benchmark spider: ``python -m scrapy_bench.run --mode plain|redis ...`` (bench/.venv-scrapy).

Writes the item count and item times as JSON to ``--out`` when the spider closes.
"""

from __future__ import annotations

import argparse
import sys

from scrapy.crawler import CrawlerProcess
from scrapy.settings import Settings

from scrapy_bench import settings as bench_settings
from scrapy_bench.spiders import BenchRedisSpider, BenchSpider


def build_settings(args: argparse.Namespace) -> Settings:
    settings = Settings()
    settings.setmodule(bench_settings, priority="project")
    settings.set("BENCH_OUT", args.out, priority="cmdline")
    if args.mode == "redis":
        settings.setdict(bench_settings.REDIS, priority="cmdline")
        settings.set("REDIS_URL", args.redis_url, priority="cmdline")
    return settings


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=("plain", "redis"), required=True)
    parser.add_argument("--start", help="seed URL (plain mode)")
    parser.add_argument("--redis-url", help="Redis of the shared scheduler (redis mode)")
    parser.add_argument("--ready", default="", help="file written once the spider waits for its seed")
    parser.add_argument("--out", required=True, help="JSON report written when the spider closes")
    args = parser.parse_args()
    if args.mode == "plain" and not args.start:
        parser.error("--start is required in plain mode")
    if args.mode == "redis" and not args.redis_url:
        parser.error("--redis-url is required in redis mode")
    process = CrawlerProcess(build_settings(args))
    if args.mode == "plain":
        process.crawl(BenchSpider, start_url=args.start)
    else:
        process.crawl(BenchRedisSpider, ready_file=args.ready)
    process.start()
    return 0


if __name__ == "__main__":
    sys.exit(main())
