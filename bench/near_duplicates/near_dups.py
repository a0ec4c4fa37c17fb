#!/usr/bin/env python3
"""bench/near_dups: near-duplicate detection on a planted corpus, through the real index.

Writes --pages articles of about 1,300 words (20 paragraphs drawn from a 20,000-word
vocabulary with a Zipf-like law, between the header and footer of one of five sites),
and for each a planted near-duplicate: the same article with --edit words of one
paragraph replaced. Every page goes through ``core.simhash`` and the crawl's band index
in a private Redis (``state.near_dups``, one script a page), originals first, then the
near-duplicates shuffled, as a crawl would find them. Prints per edit size the recall
(near-duplicates matched to their original), the precision (matches that are right) and
the Redis bytes per page (the band index and the body-digest index), at the default
distance of 3 bits.

    bench/near_dups                    # 2,000 articles and their near-duplicates, edits of 1, 3, 5, 10 words
    bench/near_dups --pages 500 --edit 3
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))
from entry import ROOT, ensure_project_python  # noqa: E402

ensure_project_python("bench/near_dups", "redis")
sys.path.insert(0, str(ROOT))

import redis  # noqa: E402
from servers import private_redis  # noqa: E402

from crawler_tasks.core.simhash import simhash  # noqa: E402
from crawler_tasks.state.keys import Keys  # noqa: E402
from crawler_tasks.state.near_dups import NearDups  # noqa: E402


def corpus(pages: int, seed: int) -> tuple[random.Random, list[str], list[float], list[tuple[str, str]], list[tuple[int, list[str]]]]:
    rnd = random.Random(seed)
    syllables = ["ka", "lo", "mi", "ne", "ru", "ta", "vo", "pe", "si", "da", "gu", "ber", "fen", "tor", "lis",
                 "quo", "zan", "wel"]
    vocab = sorted({"".join(rnd.choice(syllables) for _ in range(rnd.randint(2, 4))) for _ in range(30_000)})
    rnd.shuffle(vocab)
    vocab = vocab[:20_000]
    weights = [1 / (i + 1) ** 0.9 for i in range(len(vocab))]
    para = lambda n=60: " ".join(rnd.choices(vocab, weights, k=n))  # noqa: E731
    sites = [(para(100), para(60)) for _ in range(5)]
    articles = [(i % 5, [para() for _ in range(20)]) for i in range(pages)]
    return rnd, vocab, weights, sites, articles


def text(sites: list[tuple[str, str]], article: tuple[int, list[str]]) -> str:
    head, foot = sites[article[0]]
    return f"{head} {' '.join(article[1])} {foot}"


def edited(rnd: random.Random, vocab: list[str], article: tuple[int, list[str]], words: int) -> tuple[int, list[str]]:
    paragraphs = list(article[1])
    i = rnd.randrange(len(paragraphs))
    w = paragraphs[i].split()
    for j in rnd.sample(range(len(w)), words):
        w[j] = rnd.choice(vocab)
    paragraphs[i] = " ".join(w)
    return article[0], paragraphs


def run(client: redis.Redis, pages: int, edit: int, within: int) -> dict[str, float]:
    rnd, vocab, _, sites, articles = corpus(pages, seed=edit)
    client.flushdb()
    index = NearDups(client, Keys("bench"))
    client.execute_command("MEMORY", "PURGE")
    before = int(client.info("memory")["used_memory"])
    fp = lambda name: hashlib.sha1(name.encode()).hexdigest()  # noqa: E731
    page = lambda name: {"fingerprint": fp(name), "url": f"https://site.example.org/articles/{name}",  # noqa: E731
                         "fetched_at": "2026-11-28T12:00:00+00:00"}
    digest = lambda name: "sha1:" + base64.b32encode(hashlib.sha1(name.encode()).digest()).decode()  # noqa: E731
    wrong = 0
    started = time.perf_counter()
    for i, article in enumerate(articles):
        if index.look_and_add("c", page(f"o{i}"), simhash(text(sites, article)), within,
                              digest=digest(f"o{i}")).near is not None:
            wrong += 1  # an original matched another original
    order = list(range(pages))
    rnd.shuffle(order)
    right = 0
    for i in order:
        match = index.look_and_add("c", page(f"n{i}"), simhash(text(sites, edited(rnd, vocab, articles[i], edit))),
                                   within, digest=digest(f"n{i}")).near
        if match is None:
            continue
        if match.fingerprint == fp(f"o{i}"):
            right += 1
        else:
            wrong += 1
    seconds = time.perf_counter() - started
    grown = int(client.info("memory")["used_memory"]) - before
    found = right + wrong
    return {"recall": right / pages, "precision": right / found if found else 1.0,
            "bytes": grown / (2 * pages), "ms": seconds / (2 * pages) * 1000}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pages", type=int, default=2000)
    ap.add_argument("--edit", default="1,3,5,10", help="words replaced in one paragraph, comma list")
    ap.add_argument("--distance", type=int, default=3)
    args = ap.parse_args()
    with private_redis("near_dups", binary="redis-server") as server:
        client = redis.Redis.from_url(server.url)
        print(f"### bench/near_dups: {args.pages:,} articles of about 1,300 words and a near-duplicate of each, "
              f"distance {args.distance}\n")
        print("| Words edited in one paragraph | Recall | Precision | Redis bytes a page | ms a page (simhash and look) |")
        print("|---|---|---|---|---|")
        for edit in (int(e) for e in args.edit.split(",")):
            r = run(client, args.pages, edit, args.distance)
            print(f"| {edit} | {r['recall']:.3f} | {r['precision']:.3f} | {r['bytes']:.0f} | {r['ms']:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
