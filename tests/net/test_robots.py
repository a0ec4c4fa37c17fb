"""robots.txt, obeyed by two real worker processes: fetched once per origin for the cluster,
Allow/Disallow for our user agent, Crawl-delay, and what 5xx, 4xx, timeouts and redirects mean."""

from __future__ import annotations

import time

import pytest
from protego import Protego

from crawler_tasks.backends import open_store
from crawler_tasks.net.robots import KEPT_BYTES, origin_of, pack, robots_url, unpack
from tests.state.test_hosts import TOLERANCE, crawl, gaps, polite_settings, site

RULES = """\
User-agent: *
Disallow: /

User-agent: crawler-tasks
Disallow: /p/
Allow: /p/1
Allow: /p/0$
"""


def seeds(s, n: int) -> list[str]:
    return [f"{s.url}/p/{i}" for i in range(n)]


def records(settings, crawl_id):
    return {r.url.rsplit("/p/", 1)[-1]: r for r in open_store(settings.store).records(crawl_id)}


def test_disallowed_urls_become_records_and_allow_precedence_holds(sites, tmp_path):
    s = site(sites, pages=4)
    s.robots = [(200, RULES, 0.0)]
    settings = polite_settings(tmp_path, download_delay=0, host_concurrency=4)
    rt, crawl_id, _ = crawl(settings, seeds(s, 4), tmp_path)
    # Our group (not "*") applies: /p/0 exactly and /p/1 (the longer Allow wins), not /p/2 or /p/3.
    assert sorted(h.path for h in s.page_hits()) == ["/p/0", "/p/1"]
    recs = records(settings, crawl_id)
    assert recs["0"].status == 200 and recs["1"].status == 200
    for n in ("2", "3"):
        assert recs[n].status is None and recs[n].description == "disallowed by robots.txt"
    stats = rt.stats.read(crawl_id)
    assert stats["robots/disallowed"] == 2 and stats.get("retries", 0) == 0
    # Fetched once by the two workers' eight slots, and cached for the cluster: a second
    # crawl of the origin does not fetch it again.
    assert len(s.robots_hits()) == 1
    crawl(settings, [f"{s.url}/p/1?again"], tmp_path, flush_first=False)
    assert len(s.robots_hits()) == 1


def test_crawl_delay_raises_the_hosts_delay(sites, tmp_path):
    s = site(sites, pages=8)
    s.robots = [(200, "User-agent: *\nCrawl-delay: 0.5\n", 0.0)]
    settings = polite_settings(tmp_path, download_delay=0, host_concurrency=4)
    crawl(settings, [s.url + "/p/0"], tmp_path)
    starts = [h.start for h in s.page_hits()]
    assert len(starts) == 8
    assert min(gaps(starts)) >= 0.5 - TOLERANCE, gaps(starts)


@pytest.mark.parametrize("first", [(503, "", 0.0), (200, "User-agent: *\nDisallow: /\n", 2.0)],
                         ids=["5xx", "timeout"])
def test_robots_5xx_or_timeout_makes_the_host_wait_until_it_answers(sites, tmp_path, first):
    s = site(sites, pages=6)
    s.robots = [first, (200, "User-agent: *\nDisallow: /p/2\n", 0.0)]
    settings = polite_settings(tmp_path, download_delay=0, host_concurrency=4)  # timeout 1 s
    rt, crawl_id, _ = crawl(settings, [s.url + "/p/0"], tmp_path)
    deadline = time.monotonic() + 5  # the timed-out request's handler logs its hit once its 2 s sleep ends
    while len(s.robots_hits()) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    robots = sorted(s.robots_hits(), key=lambda h: h.start)
    assert len(robots) == 2
    pages = s.page_hits()
    assert pages[0].start > robots[1].start  # no page before robots.txt was known
    assert "/p/2" not in {h.path for h in pages}
    assert records(settings, crawl_id)["2"].description == "disallowed by robots.txt"


def test_robots_unreachable_after_retries_disallows_everything(sites, tmp_path):
    s = site(sites, pages=3)
    s.robots = [(500, "", 0.0)]
    settings = polite_settings(tmp_path, download_delay=0, host_concurrency=4, max_retries=1)
    rt, crawl_id, _ = crawl(settings, seeds(s, 3), tmp_path)
    assert s.page_hits() == [] and len(s.robots_hits()) == 2
    recs = records(settings, crawl_id)
    assert all("robots.txt unreachable (HTTP 500, 2 attempts)" in r.description for r in recs.values())
    assert rt.stats.read(crawl_id)["robots/unreachable"] == 3


@pytest.mark.parametrize("status", [403, 404])
def test_robots_4xx_allows_everything(sites, tmp_path, status):
    s = site(sites, pages=6)
    s.robots = [(status, "User-agent: *\nDisallow: /\n", 0.0)]
    settings = polite_settings(tmp_path, download_delay=0, host_concurrency=4)
    crawl(settings, [s.url + "/p/0"], tmp_path)
    assert len(s.page_hits()) == 6 and len(s.robots_hits()) == 1


def test_a_redirected_robots_txt_is_followed(sites, tmp_path):
    s = site(sites, pages=4)
    s.robots = [(301, "/moved/robots.txt", 0.0)]
    s.files["/moved/robots.txt"] = (200, "User-agent: *\nDisallow: /p/3\n", {"Content-Type": "text/plain"})
    settings = polite_settings(tmp_path, download_delay=0, host_concurrency=4)
    crawl(settings, [s.url + "/p/0"], tmp_path)
    assert sorted(h.path for h in s.page_hits()) == ["/p/0", "/p/1", "/p/2"]


def test_origin_and_robots_url():
    assert origin_of("https://u:p@Example.com/a?b") == "https://example.com:443"
    assert robots_url("https://u:p@Example.com:8443/a?b") == "https://Example.com:8443/robots.txt"


def test_a_host_the_guard_refuses_is_unreachable_at_once_and_nothing_is_sent(sites, tmp_path):
    s = site(sites, pages=2)
    s.robots = [(200, "User-agent: *\nAllow: /\n", 0.0)]
    # Only 127.0.0.2 is allowed: the site, at 127.0.0.1 under the name localhost, is not.
    settings = polite_settings(tmp_path, download_delay=0, host_concurrency=4, private_allowlist=("127.0.0.2",))
    by_name = s.url.replace("127.0.0.1", "localhost")
    rt, crawl_id, _ = crawl(settings, [f"{by_name}/p/0", f"{by_name}/p/1"], tmp_path)
    refused = "refused: localhost is at 127.0.0.1, a loopback address (not in CRAWLER_PRIVATE_ALLOWLIST)"
    recs = records(settings, crawl_id)
    assert {n: (r.status, r.description) for n, r in recs.items()} == {
        n: (None, f"robots.txt unreachable ({refused}): treated as disallowing everything (RFC 9309)")
        for n in ("0", "1")}
    assert s.robots_hits() == [] and s.page_hits() == []
    assert rt.stats.read(crawl_id).get("retries", 0) == 0
    assert rt.robots.state_of(by_name.split("//", 1)[1]) == "unreachable"  # not waiting for a retry


def big_robots_txt() -> str:
    """About 400 KiB: comments, sitemaps, another bot's rules, then the groups that matter."""
    parts = [f"# line {i}: {'-' * 60}" for i in range(2000)]
    parts += [f"Sitemap: https://example.test/sitemap-{i}.xml" for i in range(2000)]
    parts += ["User-agent: otherbot"] + [f"Disallow: /other/{i}/" for i in range(8000)]
    parts += ["", "User-agent: *  # everyone", "Disallow: /p/2  # not this one", "Crawl-delay: 0",
              "HOST: example.test", "", "User-agent: crawler-tasks", "Disallow: /p/3"]
    return "\r\n".join(parts) + "\r\n"


def test_a_large_robots_txt_is_kept_as_its_compressed_rules(sites, tmp_path):
    text = big_robots_txt()
    assert len(text) > 400_000
    s = site(sites, pages=5)
    s.robots = [(200, text, 0.0)]
    settings = polite_settings(tmp_path, download_delay=0, host_concurrency=4)
    rt, crawl_id, _ = crawl(settings, seeds(s, 5), tmp_path)
    # Our own group applies (not "*"): only /p/3 is disallowed.
    assert sorted(h.path for h in s.page_hits()) == ["/p/0", "/p/1", "/p/2", "/p/4"]
    assert rt.stats.read(crawl_id)["robots/disallowed"] == 1
    key = rt.keys.robots(origin_of(s.url + "/"))
    assert rt.redis.hget(key, "state") == b"rules"
    assert rt.redis.memory_usage(key) < KEPT_BYTES


ROBOTS_FILES = [
    RULES,
    big_robots_txt(),
    "User-agent: crawler-tasks\nSitemap: /s.xml\nDisallow: /p/\nUser-agent: x\nAllow: /p/1\n",
    "user agent crawler-tasks\n# comment\n\nDisallow /p/1#frag\n  Allow: /p/1$  \nhost:a\nsitemaps: b\n",
    "User-agent: *\nDisallow: /p/*.html$\nUser-agent: crawler-tasks*\nDisallow: /p/0\n",
    "Disallow: /before-any-agent\nUser-agent: *\nDisallow: /p/1\x85User-agent: crawler\nAllow: /\n",
]
PATHS = ["/", "/p/0", "/p/1", "/p/1$", "/p/2", "/p/3", "/p/x.html", "/before-any-agent", "/other/5/"]


@pytest.mark.parametrize("text", ROBOTS_FILES, ids=range(len(ROBOTS_FILES)))
def test_the_kept_rules_give_the_verdicts_of_the_whole_file(text):
    ua = "crawler-tasks/0.1 (+https://pypi.org/project/crawler-tasks/)"
    whole, kept = Protego.parse(text), Protego.parse(unpack(pack(text)))
    for path in PATHS:
        assert kept.can_fetch("http://a.test" + path, ua) == whole.can_fetch("http://a.test" + path, ua), path
    assert kept.crawl_delay(ua) == whole.crawl_delay(ua)


def test_rules_past_the_kept_bytes_are_dropped_at_a_line():
    text = "User-agent: *\n" + "\n".join(f"Disallow: /{i:x}{i * 7919 % 65521:x}" for i in range(40_000))
    packed = pack(text, limit=16 * 1024)
    rules = unpack(packed).split("\n")
    assert len(packed) <= 16 * 1024 and 1000 < len(rules) < 40_000
    assert text.startswith("\n".join(rules) + "\n")
