"""API keys: hashed at rest, fast to verify, revocable; read keys cannot write."""

from __future__ import annotations

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from memory_app.tenancy import services as tenancy
from memory_app.tenancy.auth import find_active_key, key_digest
from memory_app.tenancy.models import ApiKey
from tests.conftest import make_tenant

pytestmark = pytest.mark.django_db


def test_keys_are_stored_only_as_a_digest(tenant):
    stored = ApiKey.objects.get(pk=tenant.api_key.pk)
    assert tenant.key not in {stored.prefix, stored.digest, stored.name}
    assert stored.digest == key_digest(tenant.key)
    assert tenant.key.startswith(stored.prefix)


@pytest.mark.parametrize(
    "header",
    [None, "Bearer", "Bearer msk_nothing", "Token abc", "Bearer msk_", "Basic dXNlcjpwYXNz"],
)
def test_missing_or_invalid_keys_get_401(session_id, header):
    client = APIClient()
    if header:
        client.credentials(HTTP_AUTHORIZATION=header)
    response = client.get(f"/api/v1/sessions/{session_id}/")
    assert response.status_code == 401
    assert response.json()["error"] in {"not_authenticated", "authentication_failed"}
    assert response["WWW-Authenticate"] == "Bearer"


def test_a_key_with_a_valid_prefix_but_wrong_secret_is_refused(tenant, session_id):
    forged = tenant.key[:-4] + ("AAAA" if not tenant.key.endswith("AAAA") else "BBBB")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {forged}")
    assert client.get(f"/api/v1/sessions/{session_id}/").status_code == 401


def test_a_revoked_key_gets_401(tenant, session_id):
    tenancy.api_key_revoke(api_key=tenant.api_key)
    assert tenant.client.get(f"/api/v1/sessions/{session_id}/").status_code == 401


def test_a_read_key_reads_but_cannot_write(tenant, session_id):
    reader = make_tenant(tenant.team.name, role=ApiKey.Role.READ)
    assert reader.client.get(f"/api/v1/sessions/{session_id}/").status_code == 200
    response = reader.client.post(
        f"/api/v1/sessions/{session_id}/messages/", {"role": "user", "content": "x"}, format="json"
    )
    assert response.status_code == 403


def test_verification_is_one_indexed_lookup(tenant, django_assert_num_queries):
    # Cost is measured in bench/api_bench.py; here we pin the mechanism: one query by
    # prefix (unique index) with the team joined in, and no password hasher.
    with django_assert_num_queries(1):
        api_key = find_active_key(tenant.key)
        assert api_key == tenant.api_key
        assert api_key.team.name == tenant.team.name


def test_create_api_key_command_prints_the_key_alone_on_the_last_line(capsys):
    from django.core.management import call_command

    call_command("create_api_key", "--team", "gamma")
    lines = capsys.readouterr().out.strip().splitlines()
    key = lines[-1]
    assert key.startswith("msk_") and " " not in key
    api_key = find_active_key(key)
    assert api_key is not None and api_key.team.name == "gamma"


# --- each process remembers a verified key for at most API_KEY_CACHE_SECONDS ------------------


class Clock:
    """time.monotonic as the key cache sees it, moved by the test."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch) -> Clock:
    from memory_app.tenancy import auth

    fake = Clock()
    monkeypatch.setattr(auth.time, "monotonic", fake)
    auth.forget_keys()
    return fake


def test_a_remembered_key_costs_no_query_on_the_next_request(tenant, clock, django_assert_num_queries):
    assert find_active_key(tenant.key) == tenant.api_key
    with django_assert_num_queries(0):
        again = find_active_key(tenant.key)
    assert again == tenant.api_key and again.team.name == tenant.team.name


def test_a_key_revoked_by_another_process_is_refused_here_once_the_bound_has_passed(tenant, clock, settings):
    settings.API_KEY_CACHE_SECONDS = 5
    assert find_active_key(tenant.key) is not None
    # Another web process revokes it: this process hears nothing (no signal), only the database changes.
    ApiKey.objects.filter(pk=tenant.api_key.pk).update(revoked_at=timezone.now())
    clock.now += 4.9
    assert find_active_key(tenant.key) is not None  # still within the documented bound
    clock.now += 0.2
    assert find_active_key(tenant.key) is None
    assert tenant.client.get("/api/v1/sessions/").status_code == 401


def test_a_key_revoked_or_changed_in_this_process_takes_effect_here_at_once(tenant, clock, session_id):
    assert tenant.client.get(f"/api/v1/sessions/{session_id}/").status_code == 200
    tenant.api_key.role = ApiKey.Role.READ
    tenant.api_key.save()
    append = tenant.client.post(
        f"/api/v1/sessions/{session_id}/messages/", {"role": "user", "content": "x"}, format="json"
    )
    assert append.status_code == 403
    tenancy.api_key_revoke(api_key=tenant.api_key)
    assert tenant.client.get(f"/api/v1/sessions/{session_id}/").status_code == 401


def test_a_team_saved_in_this_process_is_read_fresh_by_its_keys(tenant, clock):
    assert find_active_key(tenant.key).team.memory_config_defaults == {}
    tenant.team.memory_config_defaults = {"threshold_tokens": 5000}
    tenant.team.save()
    assert find_active_key(tenant.key).team.memory_config_defaults == {"threshold_tokens": 5000}


def test_a_cache_of_zero_seconds_looks_every_key_up(tenant, clock, settings, django_assert_num_queries):
    settings.API_KEY_CACHE_SECONDS = 0
    find_active_key(tenant.key)
    with django_assert_num_queries(1):
        assert find_active_key(tenant.key) == tenant.api_key


def test_a_refused_key_is_not_remembered_so_a_new_key_works_at_once(tenant, clock):
    raw = tenant.key[:-4] + ("AAAA" if not tenant.key.endswith("AAAA") else "BBBB")
    assert find_active_key(raw) is None
    _, fresh = tenancy.api_key_create(team=tenant.team, name="fresh")
    assert find_active_key(fresh) is not None
