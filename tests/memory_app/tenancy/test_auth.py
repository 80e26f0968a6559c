"""API keys: hashed at rest, fast to verify, revocable; read keys cannot write."""

from __future__ import annotations

import pytest
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
