"""Fuzz tests of seeds and request messages from callers: a valid request or BadInput, nothing else.

Pure: builds requests only, enqueues nothing (no broker, no Redis).
"""

from __future__ import annotations

import json
import math
import re
import string

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from crawler_tasks.core.errors import BadInput
from crawler_tasks.core.models import METHODS, CrawlRequest
from crawler_tasks.core.policy import plan_retry
from crawler_tasks.core.settings import Settings
from crawler_tasks.stages.seed import build_requests

PROPS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# -- strategies ---------------------------------------------------------------

#: What ``json.loads`` can produce (Python's json reads NaN, Infinity and lone surrogates).
json_text = st.text(st.characters(exclude_categories=()), max_size=20)
json_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.integers(-(10 ** 300), 10 ** 300),
                         st.floats(), json_text)
json_values = st.recursive(json_scalars,
                           lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(json_text, inner, max_size=4),
                           max_leaves=12)

urls = st.one_of(
    st.sampled_from(["http://a.test/", "https://b.test:8443/x?y=1#z", "HTTP://C.TEST", "http://ü.test/é",
                     "ftp://a.test/", "javascript:alert(1)", "mailto:a@b.test", "data:,x", "file:///etc/passwd",
                     "/relative", "a.test", "", " ", "http://", "http://[::1", "http://a.test:99999/",
                     "http://\\@a.test/", "http://a\x00.test/", "http://a.test/\udcff"]),
    json_values,
)
odd_ids = st.one_of(
    st.text(string.ascii_letters + string.digits + "-_.", min_size=1, max_size=20),
    st.sampled_from(["", ":", "a:b", "{x}", "}x", "x}", "a b", "a\nb", "\x00", "default", "é", "a" * 10_000]),
    json_text, json_values,
)
ints = st.one_of(st.integers(-10, 10), st.integers(), st.just(10 ** 100), st.just(-(10 ** 100)))
wrong = st.one_of(json_values, st.sampled_from(["1", "1.5", "", "high", 1.5, math.inf, math.nan,
                                                True, False, None, [1], {"a": 1}]))
headers = st.one_of(
    st.dictionaries(st.text(string.ascii_letters + "-", min_size=1, max_size=8),
                    st.text(string.printable, max_size=10), max_size=3),
    st.dictionaries(json_text, json_values, max_size=3),
    wrong,
)
metas = st.one_of(
    st.dictionaries(json_text, json_values, max_size=3),
    st.fixed_dictionaries({}, optional={"NotExtract": json_values, "url_id": json_values,
                                        "max_retry_times": st.one_of(ints, wrong),
                                        "retry_priority_adjust": st.one_of(ints, wrong)}),
    wrong,
)
methods = st.one_of(st.sampled_from(["GET", "HEAD", "get", "Head", "POST", "", "GET ", "G\nET"]), wrong)


def _field(values: st.SearchStrategy) -> st.SearchStrategy:
    return st.one_of(values, wrong)


#: Request messages with the right keys and often wrong values.
request_dicts = st.fixed_dictionaries({"url": urls}, optional={
    "method": methods, "headers": headers, "meta": metas,
    "priority": _field(ints), "depth": _field(ints), "retries": _field(ints), "redirects": _field(ints),
    "crawl_id": odd_ids, "dont_filter": _field(st.booleans()),
})
#: Seeds in the upstream format, plus stray keys it tolerates and ones it does not know.
seed_dicts = st.fixed_dictionaries({"url": urls}, optional={
    "method": methods, "headers": headers, "meta": metas, "priority": _field(ints),
    "crawl_id": odd_ids, "dont_filter": _field(st.booleans()), "_encoding": json_values,
    "depth": json_values,
})
seeds = st.one_of(urls, seed_dicts, st.lists(st.one_of(urls, seed_dicts), max_size=4), json_values)


def assert_one_line(exc: BadInput) -> None:
    message = str(exc)
    assert message and "\n" not in message and "\r" not in message, repr(message)


def assert_valid(req: CrawlRequest) -> None:
    """Every field has the type the rest of the crawler relies on."""
    assert isinstance(req, CrawlRequest)
    assert isinstance(req.url, str) and req.url.startswith(("http://", "https://"))
    assert req.method in METHODS
    assert isinstance(req.headers, dict)
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in req.headers.items())
    assert isinstance(req.meta, dict)
    for name in ("priority", "depth", "retries", "redirects"):
        value = getattr(req, name)
        assert isinstance(value, int) and not isinstance(value, bool), name
    assert min(req.depth, req.retries, req.redirects) >= 0
    assert isinstance(req.crawl_id, str) and req.crawl_id and req.crawl_id.isprintable()
    assert not set(req.crawl_id) & set(":{}")  # the crawl id is a Redis Cluster hash tag
    assert isinstance(req.dont_filter, bool)
    assert re.fullmatch(r"[0-9a-f]{40}", req.fingerprint)
    # Meta the retry policy reads must not break it later, in the worker.
    for key in ("max_retry_times", "retry_priority_adjust"):
        if key in req.meta:
            assert isinstance(req.meta[key], int) and not isinstance(req.meta[key], bool), key
    plan_retry(req, Settings())


def _json_round_trip(req: CrawlRequest) -> None:
    message = json.loads(json.dumps(req.to_dict()))
    again = CrawlRequest.from_dict(message)
    assert json.dumps(again.to_dict(), sort_keys=True) == json.dumps(req.to_dict(), sort_keys=True)


# -- request messages (crawl.fetch args, claim checks) -------------------------

@PROPS
@given(json_values)
@example({"url": "http://a.test/", "a\nb": 1})               # bug: multi-line message
def test_any_json_value_is_a_request_or_bad_input(data):
    try:
        req = CrawlRequest.from_dict(data)
    except BadInput as exc:
        assert_one_line(exc)
        return
    assert_valid(req)


@PROPS
@given(request_dicts)
@example({"url": "http://a.test/", "headers": {"X-A": 1}})             # bug: accepted
@example({"url": "http://a.test/", "priority": True})                   # bug: accepted
@example({"url": "http://a.test/", "retries": -1000})                   # bug: accepted
@example({"url": "http://a.test/", "depth": -5})                        # bug: accepted
@example({"url": "http://a.test/", "dont_filter": "no"})                # bug: accepted
@example({"url": "http://a.test/", "crawl_id": "}x"})                   # bug: empty hash tag
@example({"url": "http://a.test/", "crawl_id": "a\nb"})                 # bug: accepted
@example({"url": "http://a.test/", "meta": {"max_retry_times": "x"}})  # bug: ValueError in plan_retry
@example({"url": "http://a.test/", "meta": {"retry_priority_adjust": None}})
@example({"url": 7})
def test_near_valid_request_messages_are_a_request_or_bad_input(data):
    try:
        req = CrawlRequest.from_dict(data)
    except BadInput as exc:
        assert_one_line(exc)
        return
    assert_valid(req)
    _json_round_trip(req)


# -- seeds (submit(), crawl.submit, crawler-tasks submit --file) ---------------

@PROPS
@given(seeds, st.one_of(st.just(0), ints, wrong), st.one_of(st.none(), metas),
       st.one_of(st.none(), odd_ids), st.one_of(st.just(False), st.booleans(), wrong))
@example(None, 0, None, None, False)                                 # bug: TypeError (not iterable)
@example(5, 0, None, None, False)
@example({"url": "http://a.test/", "meta": [1, 2]}, 0, None, None, False)  # bug: TypeError
@example({"url": "http://a.test/", "meta": "x"}, 0, None, None, False)
@example("http://a.test/", 0, [1, 2], None, False)                   # bug: TypeError in dict()
@example("http://a.test/", 0, "ab", None, False)                     # bug: ValueError in dict()
@example(["http://a.test/", {"url": "https://b.test/"}], 2, {"k": "v"}, "c1", True)
def test_any_seeds_and_options_are_requests_or_bad_input(seeds, priority, meta, crawl_id, dont_filter):
    try:
        requests = build_requests(seeds, priority=priority, meta=meta, crawl_id=crawl_id,
                                  dont_filter=dont_filter)
    except BadInput as exc:
        assert_one_line(exc)
        return
    assert isinstance(requests, list)
    for req in requests:
        assert_valid(req)
        _json_round_trip(req)


@PROPS
@given(st.lists(st.one_of(urls, seed_dicts), min_size=1, max_size=6))
def test_one_bad_seed_refuses_the_whole_batch(batch):
    outcomes = []
    for one in batch:
        try:
            build_requests([one])
            outcomes.append(True)
        except BadInput:
            outcomes.append(False)
    try:
        requests = build_requests(batch)
    except BadInput:
        assert not all(outcomes)
        return
    assert all(outcomes) and len(requests) == len(batch)


@PROPS
@given(st.text(st.characters(exclude_categories=()), max_size=60))
def test_a_seed_file_line_is_a_request_or_bad_input(line):
    """What ``crawler-tasks submit --file`` does with one line: JSON objects and plain URLs."""
    line = line.strip()
    seed: object = line
    if line.startswith("{"):
        try:
            seed = json.loads(line)
        except ValueError:
            return
    try:
        [req] = build_requests([seed])
    except BadInput as exc:
        assert_one_line(exc)
        return
    assert_valid(req)
