"""The one policy for URLs the server itself connects to (LLM endpoints, webhooks).

A URL an operator or a team admin can type is a request the server will make from inside
its network, so it must not reach the cloud metadata service, link-local addresses or
(unless explicitly allowed) private networks, and never a non-HTTP scheme such as `file:`.
Every outbound URL goes through `check_outbound_url`; the LLM endpoint adds the
`MEMSITE_LLM_ALLOWED_HOSTS` allowlist on top (`check_llm_url`).

Names are resolved and every address they resolve to is checked, so a DNS name pointing
at 169.254.169.254 is refused like the literal address. (A name may resolve differently
when the connection is made later; callers that fetch user-chosen URLs repeatedly should
check again at connection time.)
"""

from __future__ import annotations

import enum
import ipaddress
import re
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings

from memsite.errors import InvalidInput

ALLOWED_SCHEMES = frozenset({"http", "https"})
# Cloud instance metadata endpoints by name and address (AWS, GCP, Azure, Alibaba, Oracle ...).
METADATA_HOSTS = frozenset({"metadata.google.internal", "metadata.goog", "metadata", "instance-data"})
METADATA_ADDRESSES = frozenset(
    {
        ipaddress.ip_address("169.254.169.254"),
        ipaddress.ip_address("169.254.170.2"),  # ECS task metadata
        ipaddress.ip_address("fd00:ec2::254"),
        ipaddress.ip_address("100.100.100.200"),  # Alibaba Cloud
    }
)

# A name a resolver can look up: dot-separated labels of letters, digits, hyphens and underscores
# (container networks name services with them), 1 to 63 characters each, 253 in all. Anything else
# ("127.0.0.1%2509", "localhost%00") is no name at all, even one that does not resolve yet.
_HOST_LABEL = r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?"
_HOST_NAME = re.compile(rf"{_HOST_LABEL}(?:\.{_HOST_LABEL})*")
MAX_HOST_NAME = 253

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


class UnsafeURL(InvalidInput):
    """An outbound URL the policy refuses; `reason` is one of the REASON_* names below."""

    code = "unsafe_url"

    def __init__(self, detail: str, *, reason: str, field: str = "url") -> None:
        super().__init__(f"{field}: {detail}", fields={field: [detail]})
        self.reason = reason


REASON_SCHEME = "scheme"
REASON_MALFORMED = "malformed"
REASON_METADATA = "metadata"
REASON_LINK_LOCAL = "link_local"
REASON_PRIVATE = "private"
REASON_UNRESOLVABLE = "unresolvable"
REASON_NOT_ALLOWLISTED = "not_allowlisted"


# --- which addresses are special ----------------------------------------------------------------
#
# The table below is written out rather than taken from `ipaddress`'s is_global / is_private,
# whose answers differ between Python releases and which call NAT64, 6to4 and IPv4-compatible
# addresses "global" although they deliver to whatever IPv4 address they carry.


class Verdict(enum.IntEnum):
    """How the policy treats an address; when several apply, the larger one wins."""

    PUBLIC = 0
    PRIVATE = 1  # loopback, private or reserved: refused unless the caller allows private addresses
    LINK_LOCAL = 2  # always refused
    METADATA = 3  # always refused


_IPV4_MASK = 0xFFFF_FFFF
# The IPv4 addresses (as integers) an IPv6 address carries, given the IPv6 address as an integer.
IPv4Extractor = Callable[[int], tuple[int, ...]]


def _last_32_bits(value: int) -> tuple[int, ...]:
    """IPv4-mapped, -compatible and -translated addresses, and NAT64 under a /96 prefix."""
    return (value & _IPV4_MASK,)


def _sixtofour(value: int) -> tuple[int, ...]:
    """6to4 (RFC 3056): 2002:AABB:CCDD::/48 is routed, encapsulated, to AA.BB.CC.DD."""
    return ((value >> 80) & _IPV4_MASK,)


def _teredo(value: int) -> tuple[int, ...]:
    """Teredo (RFC 4380): 2001:0:<server>:<flags>:<port>:<client>, the client (where the packets
    go) stored inverted. The server is judged too: nothing legitimate names a bad one."""
    return ((value >> 64) & _IPV4_MASK, (value & _IPV4_MASK) ^ _IPV4_MASK)


def _nat64_any_prefix_length(value: int) -> tuple[int, ...]:
    """NAT64 under 64:ff9b:1::/48 (RFC 8215), where the local translator may use a /48, /56, /64
    or /96 prefix (RFC 6052 section 2.2) and which one is not known here: every placement counts."""
    # Bits 64-71 (the "u" octet) are always zero and never part of the IPv4 address; without
    # them, the IPv4 address directly follows a /48, /56 or /64 prefix in the remaining 120 bits.
    without_u = ((value >> 64) << 56) | (value & ((1 << 56) - 1))
    after_prefix = tuple((without_u >> (120 - length - 32)) & _IPV4_MASK for length in (48, 56, 64))
    return (*after_prefix, *_last_32_bits(value))


@dataclass(frozen=True)
class SpecialRange:
    """A row of the special-purpose table: what the range is and how the policy treats it."""

    network: IPNetwork
    verdict: Verdict
    purpose: str
    # The IPv4 addresses such an address carries: each is judged as well, and the worse verdict wins.
    embeds: IPv4Extractor | None = None


def _row(cidr: str, verdict: Verdict, purpose: str, embeds: IPv4Extractor | None = None) -> SpecialRange:
    return SpecialRange(ipaddress.ip_network(cidr), verdict, purpose, embeds)


PUBLIC, PRIVATE, LINK_LOCAL = Verdict.PUBLIC, Verdict.PRIVATE, Verdict.LINK_LOCAL

# After the IANA IPv4 and IPv6 Special-Purpose Address Registries. The most specific row
# containing an address applies; each family has a catch-all row. METADATA_ADDRESSES are checked
# before the table. Ranges whose few globally reachable members are protocol anycast services
# (192.0.0.0/24, 2001::/23) count as private: none of them is an HTTP server.
SPECIAL_RANGES: tuple[SpecialRange, ...] = (
    _row("0.0.0.0/0", PUBLIC, "any IPv4 address not listed below"),
    _row("0.0.0.0/8", PRIVATE, '"this network": connecting to 0.0.0.0 reaches the local host'),
    _row("10.0.0.0/8", PRIVATE, "private network (RFC 1918)"),
    _row("100.64.0.0/10", PRIVATE, "shared address space (carrier-grade NAT)"),
    _row("127.0.0.0/8", PRIVATE, "loopback"),
    _row("169.254.0.0/16", LINK_LOCAL, "link-local, where cloud metadata services answer"),
    _row("172.16.0.0/12", PRIVATE, "private network (RFC 1918)"),
    _row("192.0.0.0/24", PRIVATE, "IETF protocol assignments"),
    _row("192.0.2.0/24", PRIVATE, "documentation (TEST-NET-1)"),
    _row("192.88.99.0/24", PRIVATE, "6to4 relay anycast (deprecated)"),
    _row("192.168.0.0/16", PRIVATE, "private network (RFC 1918)"),
    _row("198.18.0.0/15", PRIVATE, "benchmarking"),
    _row("198.51.100.0/24", PRIVATE, "documentation (TEST-NET-2)"),
    _row("203.0.113.0/24", PRIVATE, "documentation (TEST-NET-3)"),
    _row("224.0.0.0/4", PRIVATE, "multicast"),
    _row("240.0.0.0/4", PRIVATE, "reserved"),
    _row("255.255.255.255/32", PRIVATE, "limited broadcast"),
    _row("::/0", PRIVATE, "IPv6 outside 2000::/3: unallocated or reserved by the IETF"),
    _row("2000::/3", PUBLIC, "global unicast, except the ranges below"),
    _row("::/128", PRIVATE, "unspecified: like 0.0.0.0, reaches the local host"),
    _row("::1/128", PRIVATE, "loopback"),
    _row("::/96", PRIVATE, "IPv4-compatible (deprecated, never a real destination)", _last_32_bits),
    _row("::ffff:0:0/96", PUBLIC, "IPv4-mapped: a socket connects to the IPv4 address itself", _last_32_bits),
    _row("::ffff:0:0:0/96", PRIVATE, "IPv4-translated (SIIT, obsolete)", _last_32_bits),
    _row("64:ff9b::/96", PUBLIC, "NAT64 well-known prefix: the translator connects to the IPv4 address", _last_32_bits),
    _row("64:ff9b:1::/48", PRIVATE, "NAT64 local-use prefix: a site's own translator", _nat64_any_prefix_length),
    _row("100::/64", PRIVATE, "discard-only"),
    _row("2001::/23", PRIVATE, "IETF protocol assignments (benchmarking, ORCHID, protocol anycast)"),
    _row("2001::/32", PRIVATE, "Teredo tunnelling", _teredo),
    _row("2001:db8::/32", PRIVATE, "documentation"),
    _row("2002::/16", PUBLIC, "6to4: a relay delivers to the IPv4 address", _sixtofour),
    _row("3fff::/20", PRIVATE, "documentation"),
    _row("fc00::/7", PRIVATE, "unique local (the IPv6 private networks)"),
    _row("fe80::/10", LINK_LOCAL, "link-local"),
    _row("fec0::/10", PRIVATE, "site-local (deprecated predecessor of unique local)"),
    _row("ff00::/8", PRIVATE, "multicast"),
)


def special_range(address: IPAddress) -> SpecialRange:
    """The most specific row of SPECIAL_RANGES containing `address`."""
    rows = (row for row in SPECIAL_RANGES if address in row.network)
    return max(rows, key=lambda row: row.network.prefixlen)


def _judge(address: IPAddress) -> tuple[Verdict, IPAddress]:
    """The verdict on `address` and the address it is due to: `address` itself, or an IPv4
    address it carries when that one is judged worse."""
    if address in METADATA_ADDRESSES:
        return Verdict.METADATA, address
    row = special_range(address)
    verdict, culprit = row.verdict, address
    for embedded in row.embeds(int(address)) if row.embeds else ():
        inner_verdict, inner = _judge(ipaddress.IPv4Address(embedded))
        if inner_verdict > verdict:
            verdict, culprit = inner_verdict, inner
    return verdict, culprit


def _literal_address(host: str) -> IPAddress | None:
    """The address a host names literally, including the legacy forms resolvers accept
    (`2852039166`, `0xa9.0xfe.0xa9.0xfe`, `0251.0376.0251.0376`) that ipaddress rejects."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        try:
            return ipaddress.IPv4Address(socket.inet_aton(host))
        except (OSError, ValueError):
            return None
    if isinstance(address, ipaddress.IPv6Address) and address.scope_id is not None:
        # A zone id (`%eth0`) only picks an interface; with it kept, `fd00:ec2::254%1` would not
        # equal the metadata address.
        return ipaddress.IPv6Address(int(address))
    return address


def _resolve(host: str, port: int | None) -> list[IPAddress]:
    try:
        infos = socket.getaddrinfo(host, port or 443, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError) as exc:
        raise UnsafeURL(f"the host {host!r} cannot be resolved", reason=REASON_UNRESOLVABLE) from exc
    addresses = []
    for info in infos:
        literal = _literal_address(str(info[4][0]).split("%", 1)[0])  # drop an IPv6 zone id
        if literal is not None:
            addresses.append(literal)
    return addresses


_REFUSALS = {
    Verdict.METADATA: (REASON_METADATA, "a cloud metadata address"),
    Verdict.LINK_LOCAL: (REASON_LINK_LOCAL, "a link-local address"),
    Verdict.PRIVATE: (REASON_PRIVATE, "a private or reserved address; allowlist the host to use it"),
}


def _check_address(address: IPAddress, *, host: str, allow_private: bool, field: str) -> None:
    verdict, culprit = _judge(address)
    if verdict is Verdict.PUBLIC or (verdict is Verdict.PRIVATE and allow_private):
        return
    reason, kind = _REFUSALS[verdict]
    what = kind if culprit == address else f"an IPv6 address carrying {culprit}, {kind}"
    raise UnsafeURL(f"{host!r} is {what}", reason=reason, field=field)


def url_host(url: str) -> str:
    """The lower-case host of a URL without a trailing dot ("" when there is none)."""
    try:
        return (urlsplit(url).hostname or "").rstrip(".").lower()
    except ValueError:
        return ""


def check_outbound_url(url: str, *, allow_private: bool, resolve: bool = True, field: str = "url") -> None:
    """Raise UnsafeURL unless the server may connect to `url`.

    Always refused: schemes other than http/https, URLs without a host or with a bad port, a
    host that is neither an address nor a valid host name (`127.0.0.1%2509`), cloud metadata
    hosts and addresses, link-local addresses (169.254.0.0/16, fe80::/10).
    Refused unless `allow_private`: loopback, private, shared and reserved addresses (see
    SPECIAL_RANGES). An IPv6 address carrying an IPv4 address (IPv4-mapped or -compatible,
    NAT64, 6to4, Teredo) is refused when the IPv4 address would be.
    With `resolve`, a name is looked up and each address it resolves to is checked.
    """
    if not isinstance(url, str) or not url or any(ord(ch) < 0x21 for ch in url):
        raise UnsafeURL(
            "must be an http(s) URL without spaces or control characters", reason=REASON_MALFORMED, field=field
        )
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise UnsafeURL(f"is not a valid URL ({exc})", reason=REASON_MALFORMED, field=field) from exc
    if parts.scheme.lower() not in ALLOWED_SCHEMES:
        raise UnsafeURL(
            f"scheme {parts.scheme or '(none)'!r} is not allowed; use http or https", reason=REASON_SCHEME, field=field
        )
    host = url_host(url)
    if not host:
        raise UnsafeURL("has no host", reason=REASON_MALFORMED, field=field)
    if host in METADATA_HOSTS or host.endswith(".metadata.google.internal"):
        raise UnsafeURL(f"{host!r} is a cloud metadata host", reason=REASON_METADATA, field=field)
    literal = _literal_address(host)
    if literal is not None:
        _check_address(literal, host=host, allow_private=allow_private, field=field)
        return
    if not is_host_name(host):
        raise UnsafeURL(f"{host!r} is not a valid host name", reason=REASON_MALFORMED, field=field)
    if resolve:
        for address in _resolve(host, port):
            _check_address(address, host=host, allow_private=allow_private, field=field)


def is_host_name(host: str) -> bool:
    """Whether `host` (lower case, as `url_host` gives it) is a name a resolver could answer for;
    an internationalised name counts in its ASCII (IDNA) form."""
    try:
        ascii_host = host.encode("idna").decode("ascii")
    except UnicodeError:
        return False
    return len(ascii_host) <= MAX_HOST_NAME and _HOST_NAME.fullmatch(ascii_host) is not None


def host_allowlisted(host: str, allowed_hosts: Iterable[str]) -> bool:
    """`host` equals an entry, or is a subdomain of an entry written as `.example.com`."""
    host = host.rstrip(".").lower()
    for entry in allowed_hosts:
        entry = entry.strip().rstrip(".").lower()
        if not entry:
            continue
        if entry.startswith("."):
            if host.endswith(entry) or host == entry[1:]:
                return True
        elif host == entry:
            return True
    return False


def check_llm_url(url: str, *, field: str = "llm_base_url") -> None:
    """The policy for a per-team LLM endpoint set by an administrator.

    With `MEMSITE_LLM_ALLOWED_HOSTS` set, the host must be one of them (and may then be a
    private address, such as an in-cluster model server); with it empty, only public
    addresses are accepted. Metadata, link-local and non-http(s) URLs are always refused.
    """
    allowed = list(getattr(settings, "LLM_ALLOWED_HOSTS", []))
    listed = host_allowlisted(url_host(url), allowed)
    if allowed and not listed:
        check_outbound_url(url, allow_private=False, resolve=False, field=field)  # reports a worse problem first
        raise UnsafeURL(
            f"{url_host(url)!r} is not in MEMSITE_LLM_ALLOWED_HOSTS", reason=REASON_NOT_ALLOWLISTED, field=field
        )
    check_outbound_url(url, allow_private=listed, field=field)
