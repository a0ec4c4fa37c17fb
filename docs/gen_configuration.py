"""Print docs/configuration.md, built from the settings table of the code.

    python docs/gen_configuration.py > docs/configuration.md

Every setting's row comes from its ``Spec`` (``markdown_row()``): the variable,
its default and its meaning are written once, in the code. This script only
sorts the rows into sections; a setting no section names lands in "Other
settings", so none is ever left out. ``tests/core/test_settings.py`` checks that
docs/configuration.md is exactly this script's output.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # the checkout's package, wherever this is run from

from crawler_tasks.core.settings import SPECS  # noqa: E402  (the one import of the settings module)

#: (heading, (link text, the page that explains these settings), their variables in order).
SECTIONS: tuple[tuple[str, tuple[str, str], tuple[str, ...]], ...] = (
    ("Broker, Redis and workers", ("running on several nodes", "deployment.md"), (
        "CRAWLER_BROKER_URL", "CRAWLER_REDIS_URL", "CRAWLER_KEY_PREFIX", "CRAWLER_WORKER_POOL",
        "CRAWLER_WORKER_CONCURRENCY", "CRAWLER_WORKER_MAX_MEMORY", "CRAWLER_MALLOC_ARENAS", "CRAWLER_PIPELINE",
        "CRAWLER_CLAIM_TTL", "CRAWLER_VISIBILITY_TIMEOUT", "CRAWLER_STATE_MAX_RETRIES",
        "CRAWLER_STALL_TIMEOUT", "CRAWLER_TASK_EVENTS", "CRAWLER_CRAWL_REFRESH_S")),
    ("Downloads and pages", ("hostile pages", "reliability.md#hostile-pages"), (
        "CRAWLER_USER_AGENT", "CRAWLER_DOWNLOAD_TIMEOUT", "CRAWLER_DOWNLOAD_MAXSIZE",
        "CRAWLER_DOWNLOAD_LARGE_BODIES", "CRAWLER_TEXT_MAXSIZE", "CRAWLER_MAX_DEPTH",
        "CRAWLER_ALLOWED_DOMAINS", "CRAWLER_MAX_LINKS_PER_PAGE", "CRAWLER_MAX_URL_LENGTH",
        "CRAWLER_MAX_IDLE_CONNECTIONS")),
    ("Retries and redirects", ("reliability", "reliability.md"), (
        "CRAWLER_MAX_RETRIES", "CRAWLER_RETRY_BACKOFF", "CRAWLER_RETRY_BACKOFF_MAX",
        "CRAWLER_RETRY_PRIORITY_ADJUST", "CRAWLER_REDIRECT_MAX_TIMES",
        "CRAWLER_REDIRECT_PRIORITY_ADJUST")),
    ("Politeness", ("politeness", "politeness.md"), (
        "CRAWLER_DOWNLOAD_DELAY", "CRAWLER_HOST_CONCURRENCY", "CRAWLER_HOST_SHARDS", "CRAWLER_ROBOTSTXT_OBEY",
        "CRAWLER_ROBOTSTXT_TTL", "CRAWLER_AUTOTHROTTLE", "CRAWLER_AUTOTHROTTLE_TARGET_CONCURRENCY",
        "CRAWLER_AUTOTHROTTLE_START_DELAY", "CRAWLER_AUTOTHROTTLE_MAX_DELAY")),
    ("Proxies", ("proxies", "politeness.md#proxies"), (
        "CRAWLER_PROXIES", "CRAWLER_BAN_PATTERN", "CRAWLER_BAN_THRESHOLD", "CRAWLER_PROXY_BENCH_S")),
    ("Private networks", ("security defaults", "security.md#security-defaults"), (
        "CRAWLER_DENY_PRIVATE_NETWORKS", "CRAWLER_PRIVATE_ALLOWLIST")),
    ("Rendering", ("rendering", "rendering.md"), (
        "CRAWLER_RENDER_HOSTS", "CRAWLER_RENDER_BROWSER", "CRAWLER_RENDER_WAIT", "CRAWLER_RENDER_TIMEOUT_S",
        "CRAWLER_RENDER_BLOCK", "CRAWLER_RENDER_MAX_REQUESTS", "CRAWLER_RENDER_PAGES_PER_BROWSER",
        "CRAWLER_RENDER_BROWSER_MAX_MIB")),
    ("The gate", ("the gate", "gate.md"), (
        "CRAWLER_DEDUP", "CRAWLER_GATE_SHARDS", "CRAWLER_BLOOM_CAPACITY", "CRAWLER_BLOOM_ERROR_RATE",
        "CRAWLER_RECRAWL_AFTER", "CRAWLER_MAX_QUEUED", "CRAWLER_KNOWN_LINKS")),
    ("Revisits", ("revisits and changes", "recrawl.md"), (
        "CRAWLER_REVISIT_MIN_S", "CRAWLER_REVISIT_MAX_S", "CRAWLER_REVISIT_GROWTH",
        "CRAWLER_REVISIT_TICK_S", "CRAWLER_REVISIT_BATCH", "CRAWLER_REVISIT_STORE_UNCHANGED",
        "CRAWLER_NEAR_DUPLICATES", "CRAWLER_NEAR_DUPLICATE_DISTANCE")),
    ("Seed feeds", ("seed feeds", "feeds.md"), (
        "CRAWLER_START_URLS_KEY", "CRAWLER_START_URLS_BATCH", "CRAWLER_START_URLS_INTERVAL",
        "CRAWLER_SEED_FILE", "CRAWLER_SEED_INTERVAL", "CRAWLER_SITEMAP_URLS",
        "CRAWLER_SITEMAP_LASTMOD_MAX", "CRAWLER_KAFKA_SEEDS", "CRAWLER_SEED_CRAWL_ID")),
    ("Stores", ("stores", "stores.md"), (
        "CRAWLER_STORE", "CRAWLER_STORE_BODY", "CRAWLER_STORE_BATCH", "CRAWLER_STORE_BATCH_BYTES",
        "CRAWLER_STORE_FLUSH_S", "CRAWLER_STORE_LEASE_S", "CRAWLER_STORE_WRITERS", "CRAWLER_STORE_SHARDS",
        "CRAWLER_STORE_MAX_RETRIES",
        "CRAWLER_STATS_FLUSH_S", "CRAWLER_ES_API_KEY", "CRAWLER_WARC_MAX_BYTES")),
)

#: Said under a section's table.
NOTES = {
    "Stores": (
        "Store URIs: a path (`./crawl-data/pages.db`) or `sqlite:///abs/path.db`\n"
        "(`sqlite://relative/path.db`). An unknown scheme is refused with the list of\n"
        "known ones."),
}

TABLE_HEAD = "| Variable | Default | Meaning |\n|---|---|---|"


def render() -> str:
    """The whole of docs/configuration.md."""
    specs = {spec.env: spec for spec in SPECS}
    named = [env for _, _, envs in SECTIONS for env in envs]
    unknown = [env for env in named if env not in specs]
    twice = sorted({env for env in named if named.count(env) > 1})
    if unknown or twice:
        raise SystemExit(f"gen_configuration.py: sections name unknown settings {unknown} "
                         f"or settings twice {twice}")
    sections = list(SECTIONS)
    rest = tuple(env for env in specs if env not in named)
    if rest:
        sections.append(("Other settings", ("", ""), rest))

    module = type(SPECS[0]).__module__.replace(".", "/") + ".py"
    out = [
        "# Configuration",
        "",
        "Every setting of crawler_tasks: its environment variable, default and meaning.",
        "",
        f"<!-- Generated from `SPECS` in {module} by docs/gen_configuration.py: edit the",
        "     settings there, then run `python docs/gen_configuration.py > docs/configuration.md`. -->",
        "",
        "Every setting is an environment variable, declared in one place (`SPECS`, with its",
        "bounds) and read in one (`Settings.from_env` in `crawler_tasks/core/settings.py`).",
        "Every process that talks to the queues — workers, Beat, Flower and apps that",
        "`apply_async` — must see the same values, because the Redis transport derives",
        "list names from them. Booleans take `1`/`0` (also `true`/`false`, `yes`/`no`,",
        "`on`/`off`); a value that does not parse stops the process with one line naming",
        "the variable (`CRAWLER_MAX_RETRIES: 'many' is not a valid integer`).",
        "",
    ]
    out += [f"- [{title}](#{slug(title)})" for title, _, _ in sections]
    for title, (text, page), envs in sections:
        out += ["", f"## {title}", ""]
        if page:
            out += [f"How they work: [{text}]({page}).", ""]
        out.append(TABLE_HEAD)
        out += [specs[env].markdown_row() for env in envs]
        if title in NOTES:
            out += ["", NOTES[title]]
    return "\n".join(out) + "\n"


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but - and _ dropped, spaces to -."""
    kept = "".join(c for c in heading.lower() if c.isalnum() or c in " -_")
    return kept.replace(" ", "-")


if __name__ == "__main__":
    sys.stdout.buffer.write(render().encode("utf-8"))  # UTF-8 and \n whatever the locale
