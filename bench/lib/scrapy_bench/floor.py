"""The floor: a bare asyncio crawler (aiohttp + lxml, a set for dedup), 32 requests at a time.

    python -m scrapy_bench.floor http://127.0.0.1:PORT/ --out floor.json

Same duties as the others, nothing more: fetch, parse links, keep same-host
http(s) links, canonicalise (w3lib, as Scrapy does), count pages.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from urllib.parse import urljoin, urlsplit

import aiohttp
import lxml.html
from w3lib.url import canonicalize_url


async def crawl(seed: str, concurrency: int) -> dict[str, float]:
    host = urlsplit(seed).netloc
    seen = {canonicalize_url(seed)}
    queue: asyncio.Queue[str] = asyncio.Queue()
    queue.put_nowait(seed)
    counts = {"pages": 0, "errors": 0}
    last_page_at = time.time()

    async def worker(session: aiohttp.ClientSession) -> None:
        nonlocal last_page_at
        while True:
            url = await queue.get()
            try:
                async with session.get(url) as resp:
                    body = await resp.read()
                    ok = resp.status == 200 and resp.content_type == "text/html"
                if ok:
                    counts["pages"] += 1
                    last_page_at = time.time()
                    for href in lxml.html.fromstring(body).xpath("//a/@href | //area/@href"):
                        link = urljoin(url, href.strip())
                        parts = urlsplit(link)
                        if parts.scheme in ("http", "https") and parts.netloc == host:
                            key = canonicalize_url(link)
                            if key not in seen:
                                seen.add(key)
                                queue.put_nowait(link.split("#", 1)[0])
            except (TimeoutError, aiohttp.ClientError, ValueError):
                counts["errors"] += 1
            finally:
                queue.task_done()

    started = time.time()
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:
        workers = [asyncio.create_task(worker(session)) for _ in range(concurrency)]
        await queue.join()
        for task in workers:
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
    return {"items": counts["pages"], "errors": counts["errors"], "started_at": started,
            "last_item_at": last_page_at}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("seed")
    parser.add_argument("--out", required=True)
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()
    report = asyncio.run(crawl(args.seed, args.concurrency))
    with open(args.out, "w", encoding="utf-8") as fh:
        json.dump(report, fh)
    return 0


if __name__ == "__main__":
    sys.exit(main())
