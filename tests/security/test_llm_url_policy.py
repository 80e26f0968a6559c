"""LLM configuration: no API writes an LLM URL, and every outbound URL passes one policy (memsite/url_policy.py)."""

from __future__ import annotations

import ipaddress
import re
import socket
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from drf_spectacular.generators import SchemaGenerator

from memory_app.models import Webhook
from memory_app.tenancy.models import ApiKey
from memory_app.webhooks.services import webhook_target_problem
from memsite.checks import check_llm_base_url
from memsite.url_policy import (
    REASON_LINK_LOCAL,
    REASON_METADATA,
    REASON_NOT_ALLOWLISTED,
    REASON_PRIVATE,
    REASON_SCHEME,
    REASON_UNRESOLVABLE,
    SPECIAL_RANGES,
    UnsafeURL,
    check_llm_url,
    check_outbound_url,
    url_host,
)
from tests.conftest import make_tenant


def _reason(url: str, **kwargs: Any) -> str:
    with pytest.raises(UnsafeURL) as caught:
        check_outbound_url(url, **kwargs)
    return caught.value.reason


@pytest.fixture
def fake_dns(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Names this test controls, answered like the system resolver would; other names go to it."""
    names: dict[str, str] = {}
    real = socket.getaddrinfo

    def getaddrinfo(host: str, port: Any, *args: Any, **kwargs: Any) -> list[Any]:
        if host in names:
            address = names[host]
            family = socket.AF_INET6 if ":" in address else socket.AF_INET
            sockaddr = (address, port, 0, 0) if family == socket.AF_INET6 else (address, port)
            return [(family, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", sockaddr)]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return names


# --- schemes ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "file:///etc/passwd",
        "FILE:///etc/passwd",
        "gopher://127.0.0.1:6379/_FLUSHALL",
        "ftp://example.com/",
        "//example.com/v1",
        "example.com/v1",
    ],
)
def test_it_refuses_non_http_schemes_even_when_private_hosts_are_allowed(url: str) -> None:
    assert _reason(url, allow_private=True) == REASON_SCHEME


def test_it_refuses_control_characters_and_missing_hosts() -> None:
    with pytest.raises(UnsafeURL):
        check_outbound_url("http://example.com/\r\nHost: evil", allow_private=True)
    with pytest.raises(UnsafeURL):
        check_outbound_url("http:///v1", allow_private=True)
    with pytest.raises(UnsafeURL):
        check_outbound_url("http://example.com:99999/", allow_private=True)


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1%2509/v1",  # a percent-encoded tab after a loopback address
        "http://169.254.169.254%2509/latest/meta-data/",
        "http://127%2E0%2E0%2E1/v1",
        "http://localhost%00/v1",
        "http://a..b.example/v1",
        "http://-llm.example/v1",
        "http://" + "a" * 64 + ".example/v1",
    ],
)
def test_it_refuses_a_host_that_is_neither_an_address_nor_a_host_name_even_unresolved(url: str) -> None:
    assert _reason(url, allow_private=True, resolve=False) == "malformed"


@pytest.mark.parametrize("host", ["llm", "llm_proxy.svc.cluster.local", "xn--bcher-kva.example", "bücher.example"])
def test_names_that_do_not_resolve_yet_are_left_to_the_lookup(host: str) -> None:
    check_outbound_url(f"https://{host}/v1", allow_private=True, resolve=False)


# --- metadata and link-local ---------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest/meta-data/",
        "http://[fd00:ec2::254]/latest/meta-data/",
        "http://metadata.google.internal/computeMetadata/v1/",
        "http://METADATA.google.internal./computeMetadata/v1/",
        "http://2852039166/latest/meta-data/",  # 169.254.169.254 as one decimal number
        "http://0xa9.0xfe.0xa9.0xfe/",  # ... in hexadecimal
        "http://[::ffff:169.254.169.254]/",  # ... as an IPv4-mapped IPv6 address
    ],
)
def test_it_refuses_cloud_metadata_hosts_even_when_private_hosts_are_allowed(url: str) -> None:
    assert _reason(url, allow_private=True) == REASON_METADATA


@pytest.mark.parametrize("url", ["http://169.254.1.1:8080/v1", "https://[fe80::1]/v1", "http://[fe80::abcd%25eth0]/"])
def test_it_refuses_link_local_addresses_even_when_private_hosts_are_allowed(url: str) -> None:
    assert _reason(url, allow_private=True) in {REASON_LINK_LOCAL, "malformed"}
    assert _reason("http://169.254.1.1/", allow_private=True) == REASON_LINK_LOCAL


def test_it_refuses_a_dns_name_that_resolves_to_a_link_local_address(fake_dns: dict[str, str]) -> None:
    fake_dns["llm.attacker.example"] = "169.254.10.20"
    fake_dns["v6.attacker.example"] = "fe80::1"
    fake_dns["meta.attacker.example"] = "169.254.169.254"
    assert _reason("https://llm.attacker.example/v1", allow_private=True) == REASON_LINK_LOCAL
    assert _reason("https://v6.attacker.example/v1", allow_private=True) == REASON_LINK_LOCAL
    assert _reason("https://meta.attacker.example/v1", allow_private=True) == REASON_METADATA


def test_it_refuses_a_name_that_does_not_resolve(fake_dns: dict[str, str]) -> None:
    assert _reason("https://no-such-host.invalid/v1", allow_private=False) == REASON_UNRESOLVABLE


# --- private ranges -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8000/v1",
        "http://10.1.2.3/v1",
        "http://172.16.0.9/v1",
        "http://192.168.1.10/v1",
        "http://100.64.0.1/v1",  # carrier-grade NAT
        "http://0.0.0.0/v1",
        "http://[::1]/v1",
        "http://[fd12:3456::1]/v1",  # unique local
        "http://localhost:8000/v1",  # a real name: /etc/hosts answers 127.0.0.1 / ::1
    ],
)
def test_it_refuses_private_addresses_unless_allowed(url: str) -> None:
    assert _reason(url, allow_private=False) == REASON_PRIVATE
    check_outbound_url(url, allow_private=True)


def test_it_refuses_a_public_name_resolving_to_a_private_address(fake_dns: dict[str, str]) -> None:
    fake_dns["llm.example.com"] = "10.0.0.7"
    assert _reason("https://llm.example.com/v1", allow_private=False) == REASON_PRIVATE


def test_it_accepts_public_http_and_https_urls(fake_dns: dict[str, str]) -> None:
    fake_dns["api.llm-provider.example"] = "93.184.216.34"
    check_outbound_url("https://api.llm-provider.example/v1", allow_private=False)
    check_outbound_url("http://93.184.216.34:8080/v1", allow_private=False)
    check_outbound_url("https://[2606:4700::1111]/v1", allow_private=False)


# --- IPv4 addresses carried inside IPv6 addresses ---------------------------------------------

# Teredo (2001:0:<server>:<flags>:<port>:<client XOR ffff:ffff>) with the usual public server
# 65.54.227.120; the client is where the tunnel delivers packets.
TEREDO_METADATA = "2001:0:4136:e378:8000:63bf:5601:5601"  # client 169.254.169.254
TEREDO_LOOPBACK = "2001:0:4136:e378:8000:63bf:80ff:fffe"  # client 127.0.0.1

WRAPPED_METADATA_URLS = [
    "http://[64:ff9b::a9fe:a9fe]/latest/meta-data/",  # NAT64 well-known prefix
    "http://[64:ff9b::169.254.169.254]/",  # ... written with a dotted quad
    "http://[64:ff9b:1::a9fe:a9fe]/",  # NAT64 local-use prefix, /96 layout
    "http://[64:ff9b:1:a9fe:a9:fe00::]/",  # ... /48 layout (the address straddles the u octet)
    "http://[64:ff9b:1:a9:fe:a9fe::]/",  # ... /56 layout
    "http://[64:ff9b:1:0:a9:fea9:fe00:0]/",  # ... /64 layout
    "http://[2002:a9fe:a9fe::]/",  # 6to4
    "http://[2002:a9fe:a9fe:1::1]/",
    "http://[::169.254.169.254]/",  # IPv4-compatible
    "http://[::a9fe:a9fe]/",
    f"http://[{TEREDO_METADATA}]/",
    "http://[::ffff:0:a9fe:a9fe]/",  # IPv4-translated (SIIT)
    "http://[64:ff9b::a9fe:aa02]/",  # ECS task metadata 169.254.170.2 behind NAT64
    "http://[2002:6464:64c8::]/",  # Alibaba Cloud 100.100.100.200 in 6to4
    "http://[fd00:ec2::254%251]/",  # the AWS IPv6 endpoint with a zone id appended
]
WRAPPED_LOOPBACK_URLS = [
    "http://[64:ff9b::7f00:1]/",
    "http://[64:ff9b:1::7f00:1]/",
    "http://[2002:7f00:1::]/",
    "http://[::127.0.0.1]/",
    f"http://[{TEREDO_LOOPBACK}]/",
    "http://[64:ff9b::a00:5]/",  # 10.0.0.5
    "http://[2002:c0a8:10a::]/",  # 192.168.1.10
    "http://[fec0::1]/",  # site-local: the deprecated IPv6 "private network"
]


@pytest.fixture
def production(settings) -> None:
    """The outbound-URL settings production runs with (memsite/settings.py)."""
    settings.LLM_ALLOWED_HOSTS = []
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = False


@pytest.mark.parametrize("url", WRAPPED_METADATA_URLS)
@pytest.mark.parametrize("allow_private", [False, True])
def test_metadata_inside_an_ipv6_address_is_refused(url: str, allow_private: bool) -> None:
    assert _reason(url, allow_private=allow_private) == REASON_METADATA


@pytest.mark.parametrize("url", WRAPPED_METADATA_URLS)
def test_metadata_inside_an_ipv6_address_is_refused_as_an_llm_url_even_when_allowlisted(
    settings, production: None, url: str
) -> None:
    with pytest.raises(UnsafeURL) as caught:
        check_llm_url(url)
    assert caught.value.reason == REASON_METADATA
    settings.LLM_ALLOWED_HOSTS = [url_host(url)]
    with pytest.raises(UnsafeURL) as caught:
        check_llm_url(url)
    assert caught.value.reason == REASON_METADATA
    settings.LLM_BASE_URL = url  # the operator's own setting is checked by the system check
    assert [e.id for e in check_llm_base_url()] == ["memsite.E001"]


def test_a_refusal_names_the_ipv4_address_inside() -> None:
    with pytest.raises(UnsafeURL) as caught:
        check_outbound_url("http://[64:ff9b::a9fe:a9fe]/", allow_private=True)
    assert caught.value.fields == {
        "url": ["'64:ff9b::a9fe:a9fe' is an IPv6 address carrying 169.254.169.254, a cloud metadata address"]
    }


def test_the_special_range_table_is_unambiguous() -> None:
    networks = [row.network for row in SPECIAL_RANGES]
    assert len(set(networks)) == len(networks), "the most specific row must be unique"
    assert {ipaddress.ip_network("0.0.0.0/0"), ipaddress.ip_network("::/0")} <= set(networks)
    assert all(row.embeds is None for row in SPECIAL_RANGES if row.network.version == 4)


@pytest.mark.parametrize("url", ["http://[64:ff9b::a9fe:101]/", "http://[2002:a9fe:101::]/", "http://[::169.254.1.1]/"])
def test_link_local_inside_an_ipv6_address_is_refused_even_when_private_hosts_are_allowed(url: str) -> None:
    assert _reason(url, allow_private=True) == REASON_LINK_LOCAL


@pytest.mark.parametrize("url", WRAPPED_LOOPBACK_URLS)
def test_loopback_and_private_inside_an_ipv6_address_are_refused_in_production(production: None, url: str) -> None:
    assert _reason(url, allow_private=False) == REASON_PRIVATE
    with pytest.raises(UnsafeURL) as caught:
        check_llm_url(url)
    assert caught.value.reason == REASON_PRIVATE


@pytest.mark.parametrize("url", WRAPPED_METADATA_URLS + WRAPPED_LOOPBACK_URLS)
def test_wrapped_metadata_and_loopback_are_refused_as_webhook_targets_in_production(production: None, url: str) -> None:
    problem = webhook_target_problem(url, resolve=True)
    assert problem is not None
    assert ("private" if url in WRAPPED_LOOPBACK_URLS else "metadata") in problem


def test_wrapped_metadata_is_refused_as_a_webhook_by_the_api(db, production: None) -> None:
    admin = make_tenant("wrapped-hooks", role=ApiKey.Role.ADMIN)
    for url, reason in [
        ("http://[64:ff9b::a9fe:a9fe]/", "metadata"),
        (f"http://[{TEREDO_METADATA}]/", "metadata"),
        ("http://[2002:7f00:1::]/h", "private"),
    ]:
        response = admin.client.post("/api/v1/webhooks/", {"url": url}, format="json")
        assert response.status_code == 400, response.content
        assert reason in response.json()["fields"]["url"][0]
    assert not Webhook.objects.exists()


def test_a_name_resolving_to_wrapped_metadata_is_refused(fake_dns: dict[str, str]) -> None:
    fake_dns["nat64.attacker.example"] = "64:ff9b::a9fe:a9fe"
    fake_dns["teredo.attacker.example"] = TEREDO_METADATA
    assert _reason("https://nat64.attacker.example/v1", allow_private=True) == REASON_METADATA
    assert _reason("https://teredo.attacker.example/v1", allow_private=True) == REASON_METADATA


@pytest.mark.parametrize(
    "url",
    [
        "https://[2606:4700:4700::1111]/v1",
        "https://[2a00:1450:4001:82a::200e]/v1",
        "https://[64:ff9b::5db8:d822]/v1",  # 93.184.216.34 through NAT64, as DNS64 answers on IPv6-only hosts
        "https://[2002:5db8:d822::1]/v1",  # ... through 6to4
        "https://[::ffff:93.184.216.34]/v1",
    ],
)
def test_public_ipv6_addresses_are_still_accepted_in_production(production: None, url: str) -> None:
    check_outbound_url(url, allow_private=False)
    check_llm_url(url)
    assert webhook_target_problem(url, resolve=True) is None


@pytest.mark.parametrize(
    "url",
    [
        f"http://[{TEREDO_METADATA.replace('5601:5601', 'a2b7:2fdd')}]/",  # Teredo for 93.72.208.34
        "http://[::93.184.216.34]/",  # IPv4-compatible: deprecated, never a real destination
        "http://[64:ff9b:1::5db8:d822]/",  # NAT64 local-use: a network of its own, not the internet
        "http://[2001:db8::1]/",  # documentation
        "http://[100::1]/",  # discard-only
        "http://[ff02::1]/",  # multicast
        "http://[4000::1]/",  # not yet allocated
        "http://192.0.2.1/",  # documentation
        "http://198.18.0.1/",  # benchmarking
        "http://192.88.99.1/",  # 6to4 relay anycast
        "http://224.0.0.1/",  # multicast
        "http://255.255.255.255/",
        "http://240.0.0.1/",
    ],
)
def test_tunnel_documentation_and_reserved_addresses_count_as_private(url: str) -> None:
    assert _reason(url, allow_private=False) == REASON_PRIVATE
    check_outbound_url(url, allow_private=True)


# --- the LLM allowlist ------------------------------------------------------------------------


def test_an_allowlisted_private_llm_host_is_accepted(settings, fake_dns: dict[str, str]) -> None:
    fake_dns["vllm.cluster.local"] = "10.8.0.4"
    settings.LLM_ALLOWED_HOSTS = ["vllm.cluster.local", "127.0.0.1", ".models.internal"]
    fake_dns["a.models.internal"] = "10.8.0.5"
    check_llm_url("http://vllm.cluster.local:8000/v1")
    check_llm_url("http://127.0.0.1:9000/v1")
    check_llm_url("http://a.models.internal/v1")


def test_a_host_outside_the_llm_allowlist_is_refused(settings, fake_dns: dict[str, str]) -> None:
    settings.LLM_ALLOWED_HOSTS = ["vllm.cluster.local"]
    fake_dns["api.other.example"] = "93.184.216.34"
    with pytest.raises(UnsafeURL) as caught:
        check_llm_url("https://api.other.example/v1")
    assert caught.value.reason == REASON_NOT_ALLOWLISTED
    assert caught.value.fields == {"llm_base_url": [caught.value.fields["llm_base_url"][0]]}


def test_the_allowlist_never_opens_metadata_or_link_local_or_file(settings, fake_dns: dict[str, str]) -> None:
    settings.LLM_ALLOWED_HOSTS = ["169.254.169.254", "metadata.google.internal", "sneaky.example", "169.254.3.3"]
    fake_dns["sneaky.example"] = "169.254.169.254"
    for url, reason in [
        ("http://169.254.169.254/v1", REASON_METADATA),
        ("http://metadata.google.internal/v1", REASON_METADATA),
        ("http://sneaky.example/v1", REASON_METADATA),
        ("http://169.254.3.3/v1", REASON_LINK_LOCAL),
        ("file://sneaky.example/etc/passwd", REASON_SCHEME),
    ]:
        with pytest.raises(UnsafeURL) as caught:
            check_llm_url(url)
        assert caught.value.reason == reason, url


def test_without_an_allowlist_only_public_llm_hosts_are_accepted(settings, fake_dns: dict[str, str]) -> None:
    settings.LLM_ALLOWED_HOSTS = []
    fake_dns["api.provider.example"] = "93.184.216.34"
    check_llm_url("https://api.provider.example/v1")
    with pytest.raises(UnsafeURL) as caught:
        check_llm_url("http://10.0.0.1/v1")
    assert caught.value.reason == REASON_PRIVATE


# --- LLM_BASE_URL from settings: a system check ------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "file:///etc/passwd",
        "http://169.254.169.254/latest/meta-data/",
        "http://[fe80::1]:8000/v1",
        "http://metadata.google.internal/v1",
        "http://169.254.7.7:8000/v1",
    ],
)
def test_the_system_check_rejects_a_dangerous_llm_base_url(settings, url: str) -> None:
    settings.LLM_BASE_URL = url
    errors = check_llm_base_url()
    assert [e.id for e in errors] == ["memsite.E001"]
    with pytest.raises(SystemCheckError, match=r"memsite\.E001"):
        call_command("check")


@pytest.mark.parametrize("url", ["", "http://127.0.0.1:8000/v1", "http://10.0.0.5/v1", "https://api.openai.com/v1"])
def test_the_system_check_accepts_operator_chosen_llm_servers(settings, url: str) -> None:
    settings.LLM_BASE_URL = url
    assert check_llm_base_url() == []


# --- no API endpoint sets an LLM URL -----------------------------------------------------------

_URL_LIKE = re.compile(r"(base_?url|api_?base|endpoint|llm_?(url|host|key|backend)|api_?key|openai|host)", re.I)


def _writable_properties(schema: Any, found: set[str]) -> None:
    if isinstance(schema, dict):
        for name, sub in (schema.get("properties") or {}).items():
            if not (isinstance(sub, dict) and sub.get("readOnly")):
                found.add(name)
        for value in schema.values():
            _writable_properties(value, found)
    elif isinstance(schema, list):
        for item in schema:
            _writable_properties(item, found)


def test_no_api_request_body_has_a_field_that_could_name_an_llm_server(db) -> None:
    schema = SchemaGenerator().get_schema(request=None, public=True)
    request_components = {
        name: body for name, body in schema["components"]["schemas"].items() if name.endswith("Request")
    }
    assert request_components, "the schema splits request bodies (COMPONENT_SPLIT_REQUEST)"
    found: set[str] = set()
    _writable_properties(request_components, found)
    for path_item in schema["paths"].values():
        for operation in path_item.values():
            for parameter in operation.get("parameters", []) if isinstance(operation, dict) else []:
                found.add(parameter["name"])
    assert "llm_alias" in found  # the one per-team LLM choice, a closed set of names
    assert sorted(name for name in found if _URL_LIKE.search(name)) == []
    alias = schema["components"]["schemas"]["ConfigInputRequest"]["properties"]["llm_alias"]
    assert "enum" in alias or "$ref" in alias or "oneOf" in alias


def test_even_an_admin_key_cannot_point_the_team_llm_at_a_url(db) -> None:
    admin = make_tenant("llm-admin", role=ApiKey.Role.ADMIN)
    for value in ["http://169.254.169.254/", "file:///etc/passwd", "http://127.0.0.1:6379/"]:
        response = admin.client.put("/api/v1/experiences/config/", {"llm_alias": value}, format="json")
        assert response.status_code == 400, response.content
        assert "llm_alias" in response.json()["fields"]
    response = admin.client.put(
        "/api/v1/experiences/config/",
        {"llm_base_url": "http://169.254.169.254/", "base_url": "file:///etc/passwd", "llm_alias": "offline"},
        format="json",
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["llm_alias"] == "offline"
    assert "169.254" not in response.content.decode() and "file:" not in response.content.decode()


def test_a_session_memory_config_cannot_carry_an_llm_url(api) -> None:
    response = api.post(
        "/api/v1/sessions/",
        {"memory_type": "managed_conversation", "memory_config": {"base_url": "http://169.254.169.254/"}},
        format="json",
    )
    assert response.status_code == 400, response.content
    assert any("base_url" in path for path in response.json()["fields"])
