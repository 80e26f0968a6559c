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

import ipaddress
import socket
from collections.abc import Iterable
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
LINK_LOCAL_NETWORKS = (ipaddress.ip_network("169.254.0.0/16"), ipaddress.ip_network("fe80::/10"))

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


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
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
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


def _check_address(address: IPAddress, *, host: str, allow_private: bool, field: str) -> None:
    if address in METADATA_ADDRESSES:
        raise UnsafeURL(f"{host!r} is a cloud metadata address", reason=REASON_METADATA, field=field)
    if any(address in network for network in LINK_LOCAL_NETWORKS) or address.is_link_local:
        raise UnsafeURL(f"{host!r} is a link-local address", reason=REASON_LINK_LOCAL, field=field)
    if allow_private:
        return
    if not address.is_global or address.is_multicast:
        # Loopback, RFC 1918, unique-local, carrier-grade NAT, reserved and unspecified.
        raise UnsafeURL(
            f"{host!r} is a private or reserved address; allowlist the host to use it",
            reason=REASON_PRIVATE,
            field=field,
        )


def url_host(url: str) -> str:
    """The lower-case host of a URL without a trailing dot ("" when there is none)."""
    try:
        return (urlsplit(url).hostname or "").rstrip(".").lower()
    except ValueError:
        return ""


def check_outbound_url(url: str, *, allow_private: bool, resolve: bool = True, field: str = "url") -> None:
    """Raise UnsafeURL unless the server may connect to `url`.

    Always refused: schemes other than http/https, URLs without a host or with a bad port,
    cloud metadata hosts and addresses, link-local addresses (169.254.0.0/16, fe80::/10).
    Refused unless `allow_private`: loopback, private, shared and reserved addresses.
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
    if resolve:
        for address in _resolve(host, port):
            _check_address(address, host=host, allow_private=allow_private, field=field)


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
