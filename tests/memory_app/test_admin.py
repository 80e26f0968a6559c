"""Django admin: keys are minted and revoked through the services; conversation data is read-only."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from memory_app.conversations import services
from memory_app.conversations.models import Message, Session
from memory_app.events.models import MemoryEvent
from memory_app.tenancy import auth
from memory_app.tenancy import services as tenancy
from memory_app.tenancy.models import ApiKey, Team, TeamMembership
from tests.conftest import Tenant

RAW_KEY = re.compile(rf"{auth.KEY_SCHEME}_[A-Za-z0-9_-]{{20,}}")


@pytest.fixture
def seeded(tenant: Tenant) -> Session:
    session = services.session_create(team=tenant.team, external_id="seeded", system_prompt="You are terse.")
    services.message_append(
        session=session, messages=[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    )
    services.session_reset(session=session)  # leaves a MemoryEvent
    services.message_append(session=session, messages=[{"role": "user", "content": "again"}])
    return session


def create_key(admin_client: Client, team: Team, **fields: str):
    data = {"team": team.pk, "name": "ci", "role": ApiKey.Role.READ, "agent_name": "planner", **fields}
    return admin_client.post(reverse("admin:memory_app_apikey_add"), data)


def test_creating_a_key_shows_it_once_and_stores_only_its_digest(admin_client: Client, tenant: Tenant) -> None:
    response = create_key(admin_client, tenant.team)

    assert response.status_code == 200
    shown = RAW_KEY.findall(response.content.decode())
    assert len(set(shown)) == 1
    raw_key = shown[0]
    api_key = ApiKey.objects.get(name="ci")
    assert (api_key.team, api_key.role, api_key.agent_name) == (tenant.team, "read", "planner")
    assert api_key.prefix == auth.key_prefix(raw_key)
    assert api_key.digest == auth.key_digest(raw_key)
    assert raw_key not in {getattr(api_key, f.attname) for f in ApiKey._meta.concrete_fields}
    assert auth.find_active_key(raw_key) == api_key  # the shown key really works

    # Shown in this response only: nothing kept for a later page to show again.
    for url in (
        reverse("admin:memory_app_apikey_changelist"),
        reverse("admin:memory_app_apikey_change", args=[api_key.pk]),
        reverse("admin:index"),
    ):
        assert raw_key not in admin_client.get(url).content.decode()


def test_the_key_pages_never_show_the_digest(admin_client: Client, tenant: Tenant) -> None:
    api_key = tenant.api_key

    listing = admin_client.get(reverse("admin:memory_app_apikey_changelist")).content.decode()
    detail = admin_client.get(reverse("admin:memory_app_apikey_change", args=[api_key.pk])).content.decode()

    assert api_key.prefix in listing
    for html in (listing, detail):
        assert api_key.digest not in html
        assert "digest" not in html.lower()


def test_a_key_cannot_be_edited_or_deleted_in_the_admin(admin_client: Client, tenant: Tenant) -> None:
    api_key = tenant.api_key
    change_url = reverse("admin:memory_app_apikey_change", args=[api_key.pk])

    response = admin_client.post(change_url, {"team": tenant.team.pk, "name": "x", "role": "admin"})

    assert response.status_code == 403
    api_key.refresh_from_db()
    assert api_key.role == ApiKey.Role.WRITE
    assert admin_client.get(reverse("admin:memory_app_apikey_delete", args=[api_key.pk])).status_code == 403


def test_the_revoke_action_revokes_through_the_service(
    admin_client: Client, tenant: Tenant, other_tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[ApiKey] = []
    real_revoke = tenancy.api_key_revoke

    def spy(*, api_key: ApiKey) -> ApiKey:
        calls.append(api_key)
        return real_revoke(api_key=api_key)

    monkeypatch.setattr(tenancy, "api_key_revoke", spy)

    response = admin_client.post(
        reverse("admin:memory_app_apikey_changelist"),
        {"action": "revoke_selected", "_selected_action": [tenant.api_key.pk]},
        follow=True,
    )

    assert response.status_code == 200
    assert "Revoked 1 key." in response.content.decode()
    assert [key.pk for key in calls] == [tenant.api_key.pk]
    tenant.api_key.refresh_from_db()
    other_tenant.api_key.refresh_from_db()
    assert tenant.api_key.revoked_at is not None
    assert other_tenant.api_key.revoked_at is None
    assert auth.find_active_key(tenant.key) is None
    assert tenant.client.get("/api/v1/sessions/").status_code == 401
    active = admin_client.get(reverse("admin:memory_app_apikey_changelist"), {"status": "active"})
    assert [key.pk for key in active.context["cl"].result_list] == [other_tenant.api_key.pk]


def test_message_admin_is_read_only(admin_client: Client, seeded: Session) -> None:
    message = Message.objects.filter(session=seeded).first()
    change_url = reverse("admin:memory_app_message_change", args=[message.pk])

    listing = admin_client.get(reverse("admin:memory_app_message_changelist"))
    detail = admin_client.get(change_url)

    assert listing.status_code == 200
    assert "again" in detail.content.decode()
    assert 'name="_save"' not in detail.content.decode()
    assert "delete_selected" not in listing.content.decode()
    assert admin_client.get(reverse("admin:memory_app_message_add")).status_code == 403
    assert admin_client.post(change_url, {"role": "system"}).status_code == 403
    assert admin_client.post(reverse("admin:memory_app_message_delete", args=[message.pk])).status_code == 403
    message.refresh_from_db()
    assert message.role == "user"


def test_memory_event_admin_is_read_only(admin_client: Client, seeded: Session) -> None:
    event = MemoryEvent.objects.get(session=seeded)

    assert admin_client.get(reverse("admin:memory_app_memoryevent_changelist")).status_code == 200
    assert (
        'name="_save"'
        not in admin_client.get(reverse("admin:memory_app_memoryevent_change", args=[event.pk])).content.decode()
    )
    assert admin_client.get(reverse("admin:memory_app_memoryevent_add")).status_code == 403
    assert admin_client.post(reverse("admin:memory_app_memoryevent_delete", args=[event.pk])).status_code == 403


def test_session_admin_searches_filters_and_counts_messages(
    admin_client: Client, seeded: Session, tenant: Tenant
) -> None:
    services.session_create(team=tenant.team, external_id="unrelated", memory_type="kg")
    changelist = reverse("admin:memory_app_session_changelist")

    found = admin_client.get(changelist, {"q": "terse"})
    by_type = admin_client.get(changelist, {"memory_type__exact": "kg"})

    assert [s.external_id for s in found.context["cl"].result_list] == ["seeded"]
    assert found.context["cl"].result_list[0].message_count == 1
    assert '<td class="field-message_count">1</td>' in found.content.decode()
    assert [s.external_id for s in by_type.context["cl"].result_list] == ["unrelated"]
    detail = admin_client.get(reverse("admin:memory_app_session_change", args=[seeded.pk])).content.decode()
    assert reverse("dashboard:session", args=[seeded.pk]) in detail
    assert 'name="_save"' not in detail


def test_session_admin_is_read_only(admin_client: Client, seeded: Session) -> None:
    change_url = reverse("admin:memory_app_session_change", args=[seeded.pk])

    assert admin_client.get(reverse("admin:memory_app_session_add")).status_code == 403
    assert admin_client.post(change_url, {"system_prompt": "changed"}).status_code == 403
    assert (
        admin_client.post(reverse("admin:memory_app_session_delete", args=[seeded.pk]), {"post": "yes"}).status_code
        == 403
    )
    seeded.refresh_from_db()
    assert seeded.system_prompt == "You are terse."


def test_team_admin_creates_a_team_with_members(admin_client: Client, admin_user) -> None:
    user = get_user_model().objects.create_user("grace")
    response = admin_client.post(
        reverse("admin:memory_app_team_add"),
        {
            "name": "research",
            "teammembership_set-TOTAL_FORMS": "1",
            "teammembership_set-INITIAL_FORMS": "0",
            "teammembership_set-0-user": user.pk,
            "teammembership_set-0-is_admin": "on",
        },
    )

    assert response.status_code == 302, response.content.decode()[:2000]
    team = Team.objects.get(name="research")
    assert TeamMembership.objects.get(team=team).user == user
    listing = admin_client.get(reverse("admin:memory_app_team_changelist")).content.decode()
    assert "research" in listing


def test_every_admin_list_renders(admin_client: Client, seeded: Session) -> None:
    for model in ("team", "teammembership", "apikey", "session", "message", "memoryevent"):
        response = admin_client.get(reverse(f"admin:memory_app_{model}_changelist"), {"q": "x"})
        assert response.status_code == 200, model
