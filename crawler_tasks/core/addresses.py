"""Which addresses a download may connect to: the private-network guard's rules, pure functions.

Three kinds of address:

``public``    globally routable unicast: always allowed.
``private``   loopback, private (RFC 1918, unique local), link-local, CGNAT, multicast,
              unspecified and reserved: refused while ``CRAWLER_DENY_PRIVATE_NETWORKS`` is on,
              unless ``CRAWLER_PRIVATE_ALLOWLIST`` names the host or an address range that
              holds the address.
``metadata``  a cloud provider's instance-metadata or platform endpoint, where a VM's
              credentials are served: refused even with the guard off, unless the allowlist
              names that exact address or the host name of the URL. A range never lets one in.

An IPv6 address that carries an IPv4 address (IPv4-mapped ``::ffff:0:0/96``, IPv4-compatible
``::/96``, NAT64 ``64:ff9b::/96`` and ``64:ff9b:1::/48``, 6to4 ``2002::/16``, Teredo
``2001::/32``) is judged as that IPv4 address: a NAT64 gateway or a 6to4 relay would carry the
connection to it. The local-use NAT64 prefix and Teredo are never public themselves. An IPv6
address outside the global unicast block ``2000::/3`` is never public.

The allowlist is matched against the address as connected to, never against the IPv4 inside
an IPv6 address: ``127.0.0.0/8`` does not let ``64:ff9b::7f00:1`` through (that goes to a
NAT64 gateway, off this machine).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

PUBLIC, PRIVATE, METADATA = "public", "private", "metadata"
ALLOWLIST_SETTING = "CRAWLER_PRIVATE_ALLOWLIST"

#: Instance-metadata and platform endpoints of cloud providers, as their documentation gives them.
METADATA_ADDRESSES: frozenset[IPAddress] = frozenset(ipaddress.ip_address(a) for a in (
    "169.254.169.254",  # AWS, GCP, Azure, Oracle, OpenStack, DigitalOcean, IBM, Hetzner...
    "169.254.170.2",    # AWS ECS task metadata and credentials
    "169.254.170.23",   # AWS EKS Pod Identity agent
    "169.254.0.23",     # Tencent Cloud (metadata.tencentyun.com)
    "100.100.100.200",  # Alibaba Cloud
    "192.0.0.192",      # Oracle Cloud (legacy)
    "168.63.129.16",    # Azure WireServer (a public address, reachable only from Azure VMs)
    "fd00:ec2::254",    # AWS IMDS over IPv6
    "fd00:ec2::23",     # AWS EKS Pod Identity agent over IPv6
    "fd20:ce::254",     # GCP metadata server over IPv6
))

_GLOBAL_UNICAST = ipaddress.ip_network("2000::/3")
_CGNAT = ipaddress.ip_network("100.64.0.0/10")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")
_COMPATIBLE = ipaddress.ip_network("::/96")


@dataclass(frozen=True)
class Verdict:
    """What an address is: its kind (``public``, ``private``, ``metadata``) and a phrase for messages."""

    kind: str
    what: str


def parse_address(text: str) -> IPAddress:
    """The address in ``text`` (an IPv6 zone such as ``%eth0`` dropped); ValueError if none."""
    return ipaddress.ip_address(text.split("%", 1)[0].strip("[]"))


def embedded_ipv4(ip: IPAddress) -> tuple[ipaddress.IPv4Address, str] | None:
    """The IPv4 address an IPv6 address carries and how (``NAT64``, ``6to4``...); None if none."""
    if isinstance(ip, ipaddress.IPv4Address):
        return None
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped, "IPv4-mapped"
    low32 = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip in _NAT64:
        return low32, "NAT64"
    if ip in _NAT64_LOCAL:
        return low32, "local-use NAT64"
    if ip.sixtofour is not None:
        return ip.sixtofour, "6to4"
    if ip.teredo is not None:
        return ip.teredo[1], "Teredo"
    if ip in _COMPATIBLE and int(ip) > 1:  # not :: or ::1
        return low32, "IPv4-compatible"
    return None


def classify(ip: IPAddress) -> Verdict:
    """The kind of ``ip`` (IPv4 inside IPv6 judged as the IPv4, see the module docstring)."""
    if ip in METADATA_ADDRESSES:
        return Verdict(METADATA, "a cloud-metadata address")
    inner = embedded_ipv4(ip)
    if inner is not None:
        v4, how = inner
        verdict = _classify_plain(v4)
        if how in ("local-use NAT64", "Teredo") and verdict.kind == PUBLIC:
            verdict = Verdict(PRIVATE, "a reserved address")
        return Verdict(verdict.kind, f"{how} for {v4}, {verdict.what}")
    return _classify_plain(ip)


def _classify_plain(ip: IPAddress) -> Verdict:
    if ip in METADATA_ADDRESSES:
        return Verdict(METADATA, "a cloud-metadata address")
    for test, what in ((ip.is_loopback, "a loopback address"),
                       (ip.is_unspecified, "an unspecified address"),
                       (ip.is_link_local, "a link-local address"),
                       (ip.is_multicast, "a multicast address"),
                       (isinstance(ip, ipaddress.IPv4Address) and ip in _CGNAT, "a shared (CGNAT) address"),
                       (ip.is_private, "a private address")):
        if test:
            return Verdict(PRIVATE, what)
    if not ip.is_global or (isinstance(ip, ipaddress.IPv6Address) and ip not in _GLOBAL_UNICAST):
        return Verdict(PRIVATE, "a reserved address")
    return Verdict(PUBLIC, "a public address")


def is_public(address: str) -> bool:
    """True for a globally routable address that is no cloud-metadata endpoint."""
    return classify(parse_address(address)).kind == PUBLIC


def normal_host(host: str) -> str:
    """A host as the allowlist compares it: lower case, no brackets, no trailing dot, IDNA."""
    host = host.strip().strip("[]").rstrip(".").lower()
    try:
        return host.encode("idna").decode("ascii")
    except UnicodeError:
        return host


def parse_allowlist(entries: Iterable[str]) -> tuple[str, ...]:
    """The entries in normal form (host names, addresses, CIDRs); ValueError naming a bad one."""
    out: list[str] = []
    for raw in entries:
        entry = raw.strip()
        if not entry:
            continue
        try:
            net = ipaddress.ip_network(entry.strip("[]"), strict=False)
        except ValueError:
            net = None
        if net is not None:
            exact = net.num_addresses == 1
            out.append(str(net.network_address) if exact else str(net))
            continue
        name = normal_host(entry)
        if not name or "/" in name or not all(_label_ok(label) for label in name.split(".")):
            raise ValueError(entry)
        out.append(name)
    return tuple(dict.fromkeys(out))


def _label_ok(label: str) -> bool:
    return 0 < len(label) <= 63 and all(c.isalnum() or c in "-_" for c in label) and label.isascii()


@dataclass(frozen=True)
class AddressPolicy:
    """The guard of one process: whether private addresses are refused, and the allowlist.

    Build it with :meth:`of`; ``refusal`` and ``seed_refusal`` say why something is refused.
    """

    deny_private: bool = True
    allowlist: tuple[str, ...] = ()
    _names: frozenset[str] = field(default=frozenset(), init=False, repr=False, compare=False)
    _networks: tuple[IPNetwork, ...] = field(default=(), init=False, repr=False, compare=False)
    _exact: frozenset[IPAddress] = field(default=frozenset(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        entries = parse_allowlist(self.allowlist)
        networks = []
        for entry in entries:
            try:
                networks.append(ipaddress.ip_network(entry))
            except ValueError:
                pass
        object.__setattr__(self, "allowlist", entries)
        object.__setattr__(self, "_names", frozenset(entries))
        object.__setattr__(self, "_networks", tuple(networks))
        object.__setattr__(self, "_exact", frozenset(n.network_address for n in networks if n.num_addresses == 1))

    @classmethod
    def of(cls, settings: Any) -> AddressPolicy:
        """The policy ``settings`` configure (``deny_private_networks``, ``private_allowlist``)."""
        return cls(deny_private=settings.deny_private_networks, allowlist=tuple(settings.private_allowlist))

    def allows_host(self, host: str) -> bool:
        """True when the allowlist names ``host`` itself: whatever it resolves to is allowed."""
        return normal_host(host) in self._names

    def refusal(self, host: str, address: str) -> str | None:
        """Why connecting to ``address`` for ``host`` is refused; None when it is allowed."""
        if self.allows_host(host):
            return None
        ip = parse_address(address)
        verdict = classify(ip)
        if verdict.kind == PUBLIC:
            return None
        if verdict.kind == METADATA:
            if ip in self._exact:
                return None
            hint = f"only {ALLOWLIST_SETTING} naming it exactly allows it"
        elif not self.deny_private or any(ip in net for net in self._networks):
            return None
        else:
            hint = f"not in {ALLOWLIST_SETTING}"
        if normal_host(host) == normal_host(address):
            return f"{address} is {verdict.what} ({hint})"
        return f"{host} is at {address}, {verdict.what} ({hint})"

    def seed_refusal(self, url: str) -> str | None:
        """Why a seed URL is refused before it is queued: its host is a literal address the
        guard refuses (a host name is judged when the worker connects). None otherwise."""
        host = urlsplit(url).hostname or ""
        if not host or self.allows_host(host):
            return None
        for address in literal_addresses(host):
            reason = self.refusal(host, address)
            if reason is not None:
                return reason
        return None


def literal_addresses(host: str) -> list[str]:
    """The addresses ``host`` spells (``127.1`` and ``0x7f.0.0.1`` included), without asking DNS;
    [] for a host name."""
    try:
        infos = socket.getaddrinfo(host.strip("[]"), None, 0, socket.SOCK_STREAM, 0, socket.AI_NUMERICHOST)
    except (socket.gaierror, UnicodeError, ValueError):
        return []
    return list(dict.fromkeys(str(info[4][0]) for info in infos))
