"""Fuzz tests of configuration from callers: environment variables and store URIs.

Either a working value or the project's named error with a one-line message.
Pure: no broker, no Redis; store files only under ``tmp_path``.
"""

from __future__ import annotations

import dataclasses
import math
import re
import string
import typing

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from crawler_tasks.backends import open_store
from crawler_tasks.core.errors import BadInput, CrawlerError, SettingsError, StoreUnavailable
from crawler_tasks.core.models import PageRecord
from crawler_tasks.core.settings import SPECS, Settings, _number

PROPS = settings(max_examples=300, deadline=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

NAMES = {spec.env for spec in SPECS} | {spec.attr for spec in SPECS}

# -- Settings.from_env ----------------------------------------------------------

numberish = st.one_of(
    st.integers().map(str), st.integers(-(10 ** 30), 10 ** 30).map(str),
    st.floats().map(repr), st.floats(allow_nan=False).map(str),
    st.sampled_from(["0", "-0", "1", "-1", "1.5", "1e3", "1e999", "-1e999", "nan", "NaN", "inf", "-inf",
                     "Infinity", "1_000", "0x10", "0b1", "٣", "１２", " 7 ", "7\n", "+5", "--5", "5.",
                     ".5", "1,5", "9" * 5000, "", " ", "\t"]),
)
boolish = st.sampled_from(["1", "0", "true", "FALSE", "Yes", "no", "on", "off", " on ", "2", "y", "", "tru"])
wordish = st.one_of(
    st.sampled_from(["threads", "prefork", "solo", "THREADS", "local", "split", "Split", "gevent", "redis://h:1/2",
                     "rediss://h/0", "amqp://g:g@h//", "redis+cluster://h:1", "a,b, ,C", ",", "://", "x" * 2000]),
    st.text(st.characters(exclude_categories=()), max_size=30),
)


def _values_for(spec) -> st.SearchStrategy[str]:
    if spec.parse in (int, _number):
        return st.one_of(numberish, wordish)
    if isinstance(spec.default, bool):
        return st.one_of(boolish, wordish)
    return st.one_of(wordish, numberish)


environs = st.fixed_dictionaries({}, optional={spec.env: _values_for(spec) for spec in SPECS})


def _typed_as_declared(s: Settings) -> None:
    hints = typing.get_type_hints(Settings)
    for f in dataclasses.fields(Settings):
        if f.name.startswith("_"):
            continue
        value, hint = getattr(s, f.name), hints[f.name]
        if hint is float:
            assert isinstance(value, (int, float)) and not isinstance(value, bool), f.name
        elif typing.get_origin(hint) is tuple:
            assert isinstance(value, tuple) and all(isinstance(v, str) for v in value), f.name
        else:
            assert type(value) is hint, f.name


@PROPS
@given(environs)
@example({"CRAWLER_MAX_RETRIES": "9" * 5000})
@example({"CRAWLER_VISIBILITY_TIMEOUT": "30"})
@example({"CRAWLER_VISIBILITY_TIMEOUT": "0"})   # settings.py (not ours): TypeError, None <= 0
@example({"CRAWLER_WORKER_POOL": "gevent\nx"})
@example({"CRAWLER_TASK_EVENTS": "maybe"})
def test_environment_gives_settings_or_a_one_line_settings_error(environ):
    try:
        s = Settings.from_env(environ)
    except SettingsError as exc:
        message = str(exc)
        assert "\n" not in message and "\r" not in message, repr(message)
        name = re.match(r"([A-Za-z_]+): ", message)
        assert name and name.group(1) in NAMES, message
        return
    _typed_as_declared(s)
    assert s.download_timeout > 0 and s.worker_concurrency > 0 and s.max_retries >= 0
    assert s.worker_pool in ("threads", "prefork", "solo") and s.pipeline in ("local", "split")
    if not any(isinstance(v, float) and math.isnan(v) for v in vars(s).values()):
        assert Settings.from_env(s.to_env()) == s


@PROPS
@given(st.sampled_from([spec.env for spec in SPECS if spec.parse is _number]),
       st.sampled_from(["nan", "inf", "-nan", "Infinity"]),
       st.sampled_from(["redis://h:1/0", "amqp://h//"]))
@example("CRAWLER_RETRY_BACKOFF_MAX", "nan", "redis://h:1/0")
def test_float_settings_are_finite_numbers(env, raw, broker):
    try:
        s = Settings.from_env({env: raw, "CRAWLER_BROKER_URL": broker})
    except SettingsError:
        return
    assert all(math.isfinite(v) for v in vars(s).values() if isinstance(v, float))
    assert isinstance(s.replay_ttl, int)


# -- open_store ----------------------------------------------------------------

RECORD = PageRecord(url="http://a.test/", fingerprint="f" * 40, crawl_id="c", depth=0,
                    fetched_at="2026-01-01T00:00:00+00:00", status=200)


def exercise(uri: str) -> None:
    """Open ``uri`` and use it; only the project's named errors may come out."""
    store = open_store(uri)
    try:
        store.count()
        list(store.records())
        store.upsert([RECORD])
        assert store.count() == 1
    finally:
        store.close()


@pytest.mark.parametrize("uri", ["sqlite://", "SQLITE://", "es://", "unknown://x", "http://[::1", "", "://x",
                                 "sqlite:///", "sqlit://x.db", "hbase://h:notaport/t",
                                 "elasticsearch://h:9200/", "elasticsearch://h:9200/UPPER"])
def test_malformed_store_uris_raise_bad_input(uri):
    with pytest.raises(BadInput) as info:
        exercise(uri)
    assert "\n" not in str(info.value)


def test_a_directory_is_refused_when_the_store_is_opened(tmp_path):
    for uri in (str(tmp_path), f"sqlite://{tmp_path}", str(tmp_path) + "/"):
        with pytest.raises(BadInput, match="not a file"):
            open_store(uri)  # bug: accepted, then every write raised StoreUnavailable (retried)


@pytest.mark.parametrize("name", ["a\x00b.db", "\ud800.db", "x/\x00/y.db"])
def test_unusable_file_names_raise_bad_input(tmp_path, name):
    # bug: accepted, then the first write raised a raw ValueError / UnicodeEncodeError
    with pytest.raises(BadInput):
        exercise(str(tmp_path / "s") + "/" + name)


def test_a_path_that_cannot_be_created_raises_store_unavailable():
    # /proc/x cannot be created, even by root: nothing is written anywhere.
    with pytest.raises(StoreUnavailable) as info:
        exercise("/proc/x/y.db")
    assert "\n" not in str(info.value)


def test_a_file_that_is_not_a_database_raises_store_unavailable(tmp_path):
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database\n" * 100)
    with pytest.raises(StoreUnavailable):
        exercise(str(junk))


def test_valid_store_uris_work(tmp_path):
    exercise(str(tmp_path / "a.db"))
    exercise(f"sqlite://{tmp_path / 'b.db'}")
    exercise(f"SQLite://{tmp_path / 'new' / 'dir' / 'c.db'}")


name_chars = st.characters(exclude_categories=(), exclude_characters="/")


@PROPS
@given(st.one_of(st.text(string.ascii_letters + string.digits + "._-: %?#[]@", min_size=1, max_size=20),
                 st.text(name_chars, min_size=1, max_size=12),
                 st.text(name_chars, min_size=60, max_size=120)),  # past NAME_MAX in UTF-8
       st.sampled_from(["", "sqlite://", "SQLITE://", "file://", "es://"]))
@example("\x00", "")                      # bug: raw ValueError on the first write
@example("\ud800", "")                    # bug: raw UnicodeEncodeError on the first write
@example("..", "")                        # a directory
@example("\n" + "é" * 200, "")            # bug: StoreUnavailable message spanning two lines
def test_store_uri_under_a_temporary_directory_is_a_store_or_a_named_error(tmp_path_factory, name, prefix):
    uri = f"{prefix}{tmp_path_factory.mktemp('store')}/{name}"
    try:
        exercise(uri)
    except CrawlerError as exc:
        assert isinstance(exc, (BadInput, StoreUnavailable)), type(exc)
        assert "\n" not in str(exc) and "\r" not in str(exc), repr(str(exc))
