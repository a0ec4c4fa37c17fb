"""Property tests of URL validation, canonical form and fingerprints on hostile input.

Pure functions only: no network, no Redis.
"""

from __future__ import annotations

import re
import string
import unicodedata

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from crawler_tasks.core.errors import InvalidURL, UnsupportedScheme
from crawler_tasks.core.urls import canonicalize_url, domain_allowed, fingerprint, validate_url, without_credentials

PROPS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# -- strategies ---------------------------------------------------------------

#: Every code point, lone surrogates included: a JSON seed can carry "\udcff".
any_char = st.characters(exclude_categories=())
any_text = st.text(any_char, max_size=80)

#: White space, C0/C1 controls, DEL, zero-width and bidi characters, BOM.
ODD_CHARS = (" \t\r\n\x0b\x0c\x00\x01\x1f\x7f\x80\x85\x9f\xa0\xad\u1680\u2000\u200b\u200e"
             "\u2028\u2029\u202e\u3000\ufeff\ufffd\udcff")
odd_char = st.sampled_from(ODD_CHARS)

label = st.text(string.ascii_letters + string.digits + "-", min_size=1, max_size=12)
unicode_label = st.text(st.characters(categories=["L", "N"]), min_size=1, max_size=8)
hosts = st.one_of(
    st.lists(label, min_size=1, max_size=4).map(".".join),
    st.lists(st.one_of(label, unicode_label), min_size=1, max_size=3).map(".".join),
    st.tuples(*[st.integers(0, 300)] * 4).map(lambda t: ".".join(map(str, t))),
    st.sampled_from(["[::1]", "[2001:db8::1]", "[::ffff:1.2.3.4]", "[fe80::1%25eth0]", "[v1.x]",
                     "[::1", "::1]", "", ".", "..", "a..b", ".a", "a.", "-a-", "xn--", "xn--a",
                     "%41.test", "a%2eb", "a@b", "a:b", "localhost", "0", "0x7f.1",
                     "EXAMPLE.COM", "ExAmPlE.cOm", "bücher.example", "ß.test", "ＡＢＣ.test"]),
    any_text,
)
ports = st.one_of(st.none(), st.integers(0, 70000).map(str),
                  st.sampled_from(["", "080", "+80", "-1", "0x50", "٣", " 80", "99999999999999999999"]))
userinfo = st.one_of(st.none(), st.text(string.ascii_letters + ":%@", max_size=10), any_text)
escape = st.integers(0, 255).map(lambda b: f"%{b:02x}") | st.integers(0, 255).map(lambda b: f"%{b:02X}")
segment = st.lists(st.one_of(st.text(string.ascii_letters + "-._~!$&'()*+,;=", max_size=6), escape,
                             st.sampled_from([".", "..", "%", "%z", "%zz", "~", "é", "/", "?", "#"]),
                             any_text.filter(lambda s: len(s) < 6)), max_size=4).map("".join)
paths = st.lists(segment, max_size=4).map(lambda segs: "/" + "/".join(segs))
query_pairs = st.lists(st.tuples(st.text(string.ascii_letters + string.digits + "%+é", max_size=5),
                                 st.text(string.ascii_letters + string.digits + "%+=é", max_size=5)),
                       max_size=5)
fragments = st.one_of(st.none(), any_text, st.text(string.printable, max_size=10))
schemes = st.sampled_from(["http", "https", "HTTP", "HtTpS"])


def _query(pairs: list[tuple[str, str]]) -> str:
    return "&".join(f"{k}={v}" for k, v in pairs)


def _assemble(scheme: str, user: str | None, host: str, port: str | None, path: str,
              query: str, fragment: str | None) -> str:
    netloc = (f"{user}@" if user is not None else "") + host + (f":{port}" if port is not None else "")
    return (f"{scheme}://{netloc}{path}" + (f"?{query}" if query else "")
            + (f"#{fragment}" if fragment is not None else ""))


@st.composite
def http_urls(draw: st.DrawFn) -> str:
    """Plausible http(s) URLs with odd hosts, ports, escapes and queries, sometimes poisoned."""
    url = _assemble(draw(schemes), draw(userinfo), draw(hosts), draw(ports), draw(paths),
                    _query(draw(query_pairs)), draw(fragments))
    if draw(st.booleans()):  # a stray white-space or control character anywhere
        at = draw(st.integers(0, len(url)))
        url = url[:at] + draw(odd_char) + url[at:]
    if draw(st.booleans()):  # surrounding white space, as pasted from a file
        url = (draw(st.sampled_from([" ", "\t", "\n", "\x00", ""])) + url
               + draw(st.sampled_from([" ", "\r\n", ""])))
    return url


@st.composite
def valid_urls(draw: st.DrawFn) -> str:
    """URLs :func:`validate_url` accepts (drawn from :func:`http_urls`)."""
    url = draw(http_urls())
    try:
        return validate_url(url)
    except InvalidURL:
        pass
    # Fall back on a plain URL so the draw is seldom rejected.
    host = draw(st.lists(label, min_size=1, max_size=3).map(".".join))
    # No white space, and no lone surrogate (not encodable: validate_url refuses it, rightly).
    path = draw(paths.filter(lambda p: not any(c.isspace() or "\ud800" <= c <= "\udfff" for c in p)))
    return validate_url(_assemble(draw(schemes), None, host, None, path, "", None))


candidates = st.one_of(any_text, http_urls())

_CONTROL_OR_SPACE = re.compile(r"[\x00-\x20\x7f-\x9f]")


def assert_clean(value: str) -> None:
    """A URL fit to send: a str without white space, controls or invisible characters."""
    assert isinstance(value, str)
    assert not _CONTROL_OR_SPACE.search(value), value
    assert not any(ch.isspace() or unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Zl", "Zp")
                   for ch in value), value


# -- never an unnamed exception -----------------------------------------------

@PROPS
@given(candidates)
@example("http://a.test/\udcff")          # lone surrogate (bug: UnicodeEncodeError escaped)
@example("http://a\udcff.test/")
@example("http://a\x00b.test/")            # control character in the host (bug: accepted)
@example("http://\u3000.test/")            # ideographic space, NFKC-folded to " " (bug: accepted)
@example("http://a.test\x0c/")
@example("http://a.test\u2028/")
@example("http://\u200b/")
@example("http://[::1")
@example("http://a.test:99999/")
def test_validate_url_returns_a_clean_url_or_raises_invalid_url(url):
    try:
        result = validate_url(url)
    except InvalidURL as exc:
        assert "\n" not in str(exc) and "\r" not in str(exc)
        return
    assert_clean(result)
    assert result.split("://", 1)[0] in ("http", "https")


@PROPS
@given(candidates)
@example("http://[::1]:80/")               # bug: host lost its brackets -> ValueError next time
@example("http://a\udcff.test/")
@example(" ")
def test_canonicalize_and_fingerprint_return_or_raise_invalid_url(url):
    try:
        canonical = canonicalize_url(url)
    except InvalidURL:
        canonical = None
    assert canonical is None or isinstance(canonical, str)
    try:
        fp = fingerprint(url)
    except InvalidURL:
        return
    assert re.fullmatch(r"[0-9a-f]{40}", fp)


@PROPS
@given(st.one_of(st.none(), st.integers(), st.floats(), st.booleans(), st.binary(max_size=10),
                 st.lists(st.text(max_size=3), max_size=2),
                 st.dictionaries(st.text(max_size=3), st.text(max_size=3), max_size=2)))
def test_non_string_input_raises_invalid_url(value):
    with pytest.raises(InvalidURL):
        validate_url(value)


# -- idempotence and stable identity -------------------------------------------

@PROPS
@given(valid_urls())
@example("http://[::1]:80/")
@example("https://[2001:db8::1]:443/a?b=1")
@example("http://u:p@[::1]:80/")
@example("http://0/%%30%61")  # bug: w3lib gave '%0a', then '%0A' on a second pass
def test_validation_and_canonical_form_are_idempotent(url):
    assert validate_url(url) == without_credentials(url)  # a user name and password are dropped
    url = without_credentials(url)
    canonical = canonicalize_url(url)
    assert canonicalize_url(canonical) == canonical
    assert_clean(canonical)
    # The canonical form is itself a URL we would fetch, with the same identity.
    assert validate_url(canonical)
    assert fingerprint(canonical) == fingerprint(url)


@PROPS
@given(candidates)
@example("http://\\@a.test/")               # bug: became 'http:///@a.test/', which has no host
@example("http://a.test\\@evil.test/")
@example("HTTP://\u1d2c")                      # bug: IDNA made "A", which a second pass lowered
def test_a_validated_url_validates_to_itself(url):
    try:
        valid = validate_url(url)
    except InvalidURL:
        return
    assert validate_url(valid) == valid


@PROPS
@given(valid_urls(), st.sampled_from(["GET", "HEAD", "get", "head"]))
def test_fingerprint_is_stable(url, method):
    first = fingerprint(url, method)
    fingerprint.cache_clear()
    assert fingerprint(url, method) == first == fingerprint(url, method.upper())
    assert re.fullmatch(r"[0-9a-f]{40}", first)


plain_hosts = st.one_of(st.lists(label, min_size=1, max_size=3).map(".".join),
                        st.sampled_from(["[::1]", "[2001:db8::a]", "127.0.0.1"]))
plain_paths = st.lists(st.text(string.ascii_letters + "-_~", min_size=1, max_size=6),
                       max_size=3).map(lambda s: "/" + "/".join(s))
plain_pairs = st.lists(st.tuples(st.text(string.ascii_letters + string.digits, max_size=4),
                                 st.text(string.ascii_letters + string.digits + "é%20", max_size=4)),
                       min_size=1, max_size=6)
#: A query's pairs and the same pairs in another order.
pair_orders = plain_pairs.flatmap(lambda p: st.tuples(st.just(p), st.permutations(p)))


@PROPS
@given(schemes, plain_hosts, plain_paths, pair_orders,
       st.one_of(st.none(), st.text(string.ascii_letters, max_size=5)), st.booleans(), st.booleans())
@example("http", "[::1]", "/", ([("b", "1"), ("a", "2")], [("a", "2"), ("b", "1")]), "x", True, True)
def test_canonical_equivalents_share_one_fingerprint(scheme, host, path, orders, fragment,
                                                      upper_host, explicit_port):
    """Reordered query, case of scheme and host, default port, fragment: one identity."""
    pairs, shuffled = orders
    plain = validate_url(_assemble(scheme, None, host, None, path, _query(pairs), None))
    port = {"http": "80", "https": "443"}[scheme.lower()] if explicit_port else None
    variant = validate_url(_assemble(scheme.upper() if upper_host else scheme.lower(), None,
                                     host.upper() if upper_host else host, port, path,
                                     _query(shuffled), fragment))
    assert canonicalize_url(variant) == canonicalize_url(plain)
    assert fingerprint(variant) == fingerprint(plain)


@PROPS
@given(st.lists(label, min_size=1, max_size=3).map(".".join),
       st.text(string.ascii_letters + string.digits + "-._~", min_size=1, max_size=8))
def test_escaped_unreserved_characters_do_not_change_the_fingerprint(host, text):
    escaped = "".join(f"%{ord(c):02X}" for c in text)
    plain, escaped = validate_url(f"http://{host}/{text}"), validate_url(f"http://{host}/{escaped}")
    assert fingerprint(plain) == fingerprint(escaped)


# -- only http and https -------------------------------------------------------

other_schemes = st.one_of(
    st.sampled_from(["ftp", "javascript", "mailto", "data", "file", "ws", "wss", "gopher", "about",
                     "blob", "view-source", "jar", "httpx", "http+unix", "hxxp", "ht tp", "htp"]),
    st.from_regex(r"[a-zA-Z][a-zA-Z0-9+.-]{0,8}", fullmatch=True).filter(
        lambda s: s.lower() not in ("http", "https")),
)


@PROPS
@given(other_schemes, st.sampled_from(["://", ":", ":/", ":///"]), st.text(string.printable, max_size=30))
@example("javascript", ":", "alert(1)//http://a.test/")
@example("data", ":", "text/html,<script>")
@example("file", ":///", "etc/passwd")
def test_other_schemes_are_rejected(scheme, sep, rest):
    with pytest.raises(InvalidURL):
        validate_url(f"{scheme}{sep}{rest}")


@PROPS
@given(st.one_of(st.text(string.ascii_letters + string.digits + "/.-_?=&#", max_size=30),
                 st.sampled_from(["", " ", "//a.test/x", "/a/b", "a.test/x", "?q=1", "#top", "../x",
                                  "\\\\a.test\\x", "http:/\\a.test", "www.a.test"])))
def test_relative_and_empty_references_are_rejected(ref):
    if ref.lower().startswith(("http://", "https://")):
        return
    with pytest.raises(InvalidURL):
        validate_url(ref)


@PROPS
@given(any_text)
def test_unsupported_schemes_raise_the_subclass(text):
    try:
        result = validate_url(text)
    except UnsupportedScheme:
        assert not text.strip().lower().startswith(("http:", "https:"))
    except InvalidURL:
        pass
    else:
        assert result.startswith(("http://", "https://"))


# -- allowed domains ------------------------------------------------------------

def _allowed_by_scan(host: str, domains: frozenset[str]) -> bool:
    """The definition: the host is a domain, or ends with "." and a domain."""
    return host in domains or any(host.endswith("." + d) for d in domains)


domain_names = st.lists(st.sampled_from(["a", "b", "example", "com", "test", "xn--bcher-kva", "0", "1"]),
                        min_size=1, max_size=4).map(".".join)


@PROPS
@given(labels=st.lists(st.sampled_from(["a", "b", "example", "com", "test", "www", "0", "1"]),
                       min_size=1, max_size=5),
       domains=st.lists(domain_names, max_size=6), take=st.integers(0, 5))
def test_domain_check_agrees_with_a_scan_of_every_domain(labels, domains, take):
    host = ".".join(labels)
    chosen = frozenset(domains) | ({".".join(labels[take:])} if take < len(labels) else set())
    assert domain_allowed(f"http://{host}:8080/p", chosen) == _allowed_by_scan(host, chosen)
