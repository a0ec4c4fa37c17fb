"""The private-network guard's rules: what an address is, what the allowlist lets through."""

from __future__ import annotations

import ipaddress

import pytest

from crawler_tasks.core.addresses import (
    METADATA,
    PRIVATE,
    PUBLIC,
    AddressPolicy,
    classify,
    embedded_ipv4,
    is_public,
    literal_addresses,
    parse_allowlist,
)
from crawler_tasks.core.errors import SettingsError
from crawler_tasks.core.settings import Settings


@pytest.mark.parametrize("address,kind", [
    ("127.0.0.1", PRIVATE), ("10.1.2.3", PRIVATE), ("192.168.0.1", PRIVATE), ("172.16.0.1", PRIVATE),
    ("169.254.1.1", PRIVATE), ("100.64.0.1", PRIVATE), ("0.0.0.0", PRIVATE), ("224.0.0.1", PRIVATE),
    ("192.0.2.1", PRIVATE), ("240.0.0.1", PRIVATE), ("::1", PRIVATE), ("::", PRIVATE),
    ("fe80::1", PRIVATE), ("fc00::1", PRIVATE), ("ff02::1", PRIVATE), ("2001:db8::1", PRIVATE),
    ("169.254.169.254", METADATA), ("169.254.170.2", METADATA), ("100.100.100.200", METADATA),
    ("fd00:ec2::254", METADATA), ("168.63.129.16", METADATA), ("192.0.0.192", METADATA),
    ("93.184.216.34", PUBLIC), ("8.8.8.8", PUBLIC), ("2606:4700::1111", PUBLIC),
])
def test_each_address_has_its_kind(address, kind):
    assert classify(ipaddress.ip_address(address)).kind == kind


@pytest.mark.parametrize("address,inner,how,kind", [
    ("::ffff:127.0.0.1", "127.0.0.1", "IPv4-mapped", PRIVATE),
    ("::ffff:8.8.8.8", "8.8.8.8", "IPv4-mapped", PUBLIC),
    ("64:ff9b::a9fe:a9fe", "169.254.169.254", "NAT64", METADATA),
    ("64:ff9b::7f00:1", "127.0.0.1", "NAT64", PRIVATE),
    ("64:ff9b::808:808", "8.8.8.8", "NAT64", PUBLIC),
    ("64:ff9b:1::a00:1", "10.0.0.1", "local-use NAT64", PRIVATE),
    ("64:ff9b:1::808:808", "8.8.8.8", "local-use NAT64", PRIVATE),  # local use: never public
    ("2002:a9fe:a9fe::1", "169.254.169.254", "6to4", METADATA),
    ("2002:7f00:1::", "127.0.0.1", "6to4", PRIVATE),
    ("2002:808:808::1", "8.8.8.8", "6to4", PUBLIC),
    ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "192.0.2.45", "Teredo", PRIVATE),
    ("::7f00:1", "127.0.0.1", "IPv4-compatible", PRIVATE),
])
def test_ipv4_inside_ipv6_is_judged_as_the_ipv4(address, inner, how, kind):
    ip = ipaddress.ip_address(address)
    assert embedded_ipv4(ip) == (ipaddress.ip_address(inner), how)
    verdict = classify(ip)
    assert verdict.kind == kind and verdict.what.startswith(f"{how} for {inner}, ")


@pytest.mark.parametrize("address,public", [
    ("127.0.0.1", False), ("169.254.169.254", False), ("fe80::1%eth0", False), ("[::1]", False),
    ("64:ff9b::7f00:1", False), ("2002:a9fe:a9fe::", False), ("93.184.216.34", True),
])
def test_is_public(address, public):
    assert is_public(address) is public


def test_the_allowlist_takes_names_addresses_and_ranges_in_normal_form():
    assert parse_allowlist(["LocalHost.", " 10.1.2.3/8", "127.0.0.1/32", "[::1]", "fd00::/8", "bücher.test",
                            "intra_net.example", "", "localhost"]) == (
        "localhost", "10.0.0.0/8", "127.0.0.1", "::1", "fd00::/8", "xn--bcher-kva.test", "intra_net.example")
    for bad in ("http://x", "a b", "10.0.0.0/33", "host:8080", "a..b"):
        with pytest.raises(ValueError):
            parse_allowlist([bad])


def test_the_allowlist_setting_is_checked_and_round_trips():
    s = Settings.from_env({"CRAWLER_PRIVATE_ALLOWLIST": "Intranet.Example, 10.0.0.0/8"})
    assert s.private_allowlist == ("intranet.example", "10.0.0.0/8") and s.deny_private_networks is True
    assert Settings.from_env(s.to_env()) == s
    with pytest.raises(SettingsError, match="CRAWLER_PRIVATE_ALLOWLIST: 'ftp://x' is not a host name"):
        Settings.from_env({"CRAWLER_PRIVATE_ALLOWLIST": "ftp://x"})
    assert Settings().deny_private_networks is True


POLICY = AddressPolicy(allowlist=("10.0.0.0/8", "intranet.example", "169.254.170.2", "fd00::/8"))


@pytest.mark.parametrize("host,address,allowed", [
    ("a.example", "93.184.216.34", True),
    ("a.example", "10.9.9.9", True),             # in a range
    ("a.example", "192.168.0.1", False),
    ("intranet.example", "192.168.0.1", True),   # named: whatever it resolves to
    ("INTRANET.example.", "192.168.0.1", True),
    ("other.example", "127.0.0.1", False),
    ("a.example", "169.254.170.2", True),        # a metadata address named exactly
    ("a.example", "169.254.169.254", False),     # ranges never cover metadata...
    ("a.example", "fd00:ec2::254", False),       # ...even one that holds it
    ("a.example", "fd12::1", True),
    ("a.example", "::ffff:10.0.0.1", False),     # matched as connected to, not as the IPv4 inside
    ("a.example", "64:ff9b::a00:1", False),
])
def test_the_policy_allows_public_addresses_and_what_the_allowlist_names(host, address, allowed):
    assert (POLICY.refusal(host, address) is None) is allowed


def test_with_private_networks_allowed_metadata_is_still_refused():
    open_policy = AddressPolicy(deny_private=False)
    assert open_policy.refusal("a", "10.0.0.1") is None and open_policy.refusal("a", "::1") is None
    assert open_policy.refusal("a", "169.254.169.254") == (
        "a is at 169.254.169.254, a cloud-metadata address "
        "(only CRAWLER_PRIVATE_ALLOWLIST naming it exactly allows it)")
    assert AddressPolicy(deny_private=False, allowlist=("a",)).refusal("a", "169.254.169.254") is None


@pytest.mark.parametrize("url,refused", [
    ("http://169.254.169.254/latest/meta-data/", "169.254.169.254 is a cloud-metadata address"),
    ("http://[::ffff:a9fe:a9fe]/", "IPv4-mapped for 169.254.169.254"),
    ("http://2852039166/", "2852039166 is at 169.254.169.254"),  # the decimal spelling
    ("http://0x7f.1/", "0x7f.1 is at 127.0.0.1, a loopback address"),
    ("http://10.0.0.1:8080/x", "10.0.0.1 is a private address"),
    ("http://metadata.google.internal/", None),  # a name: judged when a worker connects
    ("http://example.com/", None),
    ("http://93.184.216.34/", None),
])
def test_a_seed_is_refused_when_its_host_is_a_literal_refused_address(url, refused):
    reason = AddressPolicy().seed_refusal(url)
    assert (reason is None) if refused is None else (refused in reason), reason


def test_literal_addresses_never_ask_dns():
    assert literal_addresses("127.1") == ["127.0.0.1"]
    assert literal_addresses("[::1]") == ["::1"]
    assert literal_addresses("localhost") == [] and literal_addresses("example.com") == []
