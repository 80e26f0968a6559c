"""Fixtures for experiences: an admin client of the `tenant` team and approved experiences."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from experiences_app import services
from experiences_app.models import Experience
from memory_app import services as memory_services
from memory_app.models import ApiKey, Team


@pytest.fixture
def admin_api(tenant) -> APIClient:
    """An admin key of the same team as `api` (approving and settings need one)."""
    _, raw = memory_services.api_key_create(team=tenant.team, name="alpha-admin", role=ApiKey.Role.ADMIN)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client


def add_experience(
    team: Team, exp_id: str, *, when: str, what: str, who: list[str] | None = None, status: str = "approved"
) -> Experience:
    return services.experience_create(
        team=team, exp_id=exp_id, who=who or [], when=when, what=what, actor="test", status=status
    )
