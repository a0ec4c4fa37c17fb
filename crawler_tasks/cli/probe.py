"""``crawler-tasks parse URL`` and ``crawler-tasks shell URL``: one URL through the program,
nothing stored (:mod:`crawler_tasks.stages.probe`).

``parse`` prints what the parser of the page yields (items, then requests), as
``scrapy parse`` does; ``shell`` opens a Python prompt holding the ``page``, as
``scrapy shell`` does. Both load the plugins, pipelines and middlewares of the
settings (and ``--plugins``); the URL's own host is let through the private-network
guard when it is an address typed as such, as ``crawler-tasks crawl`` lets its seeds.
"""

from __future__ import annotations

import argparse
import code
import json
import sys
from typing import Any

from ..core.addresses import AddressPolicy
from ..core.errors import BadInput
from ..core.models import CrawlRequest
from ..core.program import parse_plugins, program_of
from ..core.settings import Settings
from ..net.download import make_session
from ..stages.probe import Probe, parser_for, probe
from .crawl import allow_seed_hosts


def cmd_parse(args: argparse.Namespace) -> int:
    settings, program, req = _setup(args)
    probed = probe(settings, program, req, _session(settings))
    if args.json:
        print(json.dumps(_as_json(probed), ensure_ascii=False))
    else:
        _print(probed)
    return 0


def cmd_shell(args: argparse.Namespace) -> int:
    settings, program, req = _setup(args)
    probed = probe(settings, program, req, _session(settings))
    names: dict[str, Any] = {"page": probed.page, "request": req, "record": probed.record, "probe": probed,
                             "items": probed.items, "requests": probed.requests}
    banner = "\n".join([
        f"crawler-tasks shell: {req.url}",
        f"  outcome   {_outcome(probed)}",
        f"  parser    {parser_for(program, req, settings)}",
        f"  yields    {len(probed.items)} items, {len(probed.requests)} requests",
        "  names     page (page.css(...).get(), page.xpath(...), page.json()), request, record, items,",
        "            requests, probe",
        "  Ctrl-D leaves."])
    code.interact(banner=banner, local=names, exitmsg="")
    return 0


def _setup(args: argparse.Namespace) -> tuple[Settings, Any, CrawlRequest]:
    settings = Settings.from_env()
    plugins = parse_plugins(args.plugins or "", "--plugins")
    if plugins:
        settings = settings.replace(plugins=tuple(dict.fromkeys((*settings.plugins, *plugins))))
    req = CrawlRequest(url=args.url, callback=args.callback, cb_kwargs=_json_object(args.cb_kwargs, "--cb-kwargs"),
                       meta=_json_object(args.meta, "--meta"))
    settings = allow_seed_hosts(settings, [req])
    return settings, program_of(settings), req


def _session(settings: Settings) -> Any:
    return make_session(settings.user_agent, policy=AddressPolicy.of(settings), pool_hosts=1)


def _json_object(raw: str | None, option: str) -> dict[str, Any]:
    if raw is None:
        return {}
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise BadInput(f"{option}: not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise BadInput(f"{option}: must be a JSON object")
    return value


def _outcome(probed: Probe) -> str:
    record = probed.record
    status = f" {record.status}" if record is not None and record.status is not None else ""
    kind = f" {record.content_type}" if record is not None and record.content_type else ""
    note = f" ({probed.note})" if probed.note else ""
    return f"{probed.outcome}{status}{kind}{note}"


def _print(probed: Probe) -> None:
    record = probed.record
    print(f"{probed.request.method} {probed.request.url}")
    print(f"outcome   {_outcome(probed)}")
    print(f"parser    {probed.parser or 'none'}")
    if record is not None and record.description:
        print(f"note      {record.description}")
    print(f"# items ({len(probed.items)})")
    for item in probed.items:
        print(json.dumps(item, ensure_ascii=False))
    print(f"# requests ({len(probed.requests)})")
    for r in probed.requests:
        extra = "".join(f" {name}={value}" for name, value in (("callback", r.callback), ("errback", r.errback),
                                                                ("priority", r.priority)) if value)
        print(f"{r.method} {r.url}{extra}")
    if probed.counts:
        print("# counters " + " ".join(f"{name}={n}" for name, n in sorted(probed.counts.items())))
    sys.stdout.flush()


def _as_json(probed: Probe) -> dict[str, Any]:
    record = probed.record
    return {"url": probed.request.url, "outcome": probed.outcome, "status": record.status if record else None,
            "parser": probed.parser, "description": record.description if record else None,
            "note": probed.note, "items": probed.items,
            "requests": [r.to_dict() for r in probed.requests], "counts": probed.counts}
