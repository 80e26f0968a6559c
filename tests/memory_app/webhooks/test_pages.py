"""The dashboard's webhooks page: the team's webhooks (secrets masked), the delivery log, and
redelivery of failed deliveries (curator only, own team only)."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from memory_app.conversations import services
from memory_app.events.models import MemoryEvent
from memory_app.events.services import event_record
from memory_app.jobs.dispatchers import Sent
from memory_app.models import WebhookDelivery
from memory_app.tenancy.models import TeamMembership
from memory_app.webhooks import services as webhooks
from tests.conftest import Tenant, make_tenant
from tests.job_dispatch import Sends

Status = WebhookDelivery.Status


@pytest.fixture(autouse=True)
def sent(job_outbox: list[Sent]) -> Sends:
    return Sends(job_outbox, webhooks.JOB)


def login(tenant: Tenant, name: str, *, curator: bool) -> Client:
    user = get_user_model().objects.create_user(name, password="pw-0123456789")
    TeamMembership.objects.create(team=tenant.team, user=user, is_admin=curator)
    client = Client()
    client.force_login(user)
    return client


def failed_delivery(tenant: Tenant, url: str) -> tuple[WebhookDelivery, str]:
    _, secret = webhooks.webhook_create(team=tenant.team, url=url, actor="test")
    session = services.session_create(team=tenant.team)
    event_record(
        team_id=tenant.team.pk, session=session, kind=MemoryEvent.Kind.COMPACTION_FAILED, data={"error": "boom"}
    )
    delivery = WebhookDelivery.objects.get(webhook__url=url)
    WebhookDelivery.objects.filter(pk=delivery.pk).update(
        status=Status.FAILED, attempts=5, response_code=502, error="gave up after 5 attempts: HTTP 502: bad gateway"
    )
    return delivery, secret


def test_the_page_lists_the_teams_webhooks_and_deliveries_with_secrets_masked(tenant: Tenant) -> None:
    other = make_tenant("dash-other")
    mine, secret = failed_delivery(tenant, "http://127.0.0.1:9/mine")
    failed_delivery(other, "http://127.0.0.1:9/theirs")
    page = login(tenant, "grace", curator=True).get("/webhooks/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "http://127.0.0.1:9/mine" in html and "theirs" not in html
    assert secret not in html and secret[:10] in html
    assert f'id="delivery-{mine.pk}"' in html
    assert "gave up after 5 attempts: HTTP 502" in html and ">502<" in html
    assert "Redeliver" in html
    assert 'href="/webhooks/" aria-current="page"' in html  # the nav entry
    assert "Redeliver" not in login(tenant, "ada", curator=False).get("/webhooks/").content.decode()
    filtered = login(tenant, "lin", curator=True).get("/webhooks/?status=delivered").content.decode()
    assert f'id="delivery-{mine.pk}"' not in filtered


def test_redeliver_queues_a_new_delivery_for_staff_of_the_team_only(tenant: Tenant, sent: Sends) -> None:
    other = make_tenant("dash-beta")
    mine, _ = failed_delivery(tenant, "http://127.0.0.1:9/mine")
    theirs, _ = failed_delivery(other, "http://127.0.0.1:9/theirs")
    path = f"/webhooks/deliveries/{mine.pk}/redeliver/"
    assert login(tenant, "ada", curator=False).post(path).status_code == 403
    curator = login(tenant, "grace", curator=True)
    assert curator.post(f"/webhooks/deliveries/{theirs.pk}/redeliver/").status_code == 404
    assert WebhookDelivery.objects.count() == 2

    response = curator.post(path, follow=True)
    assert response.status_code == 200
    again = WebhookDelivery.objects.get(redelivery_of=mine)
    assert again.status == Status.PENDING and again.payload == mine.payload
    assert "Queued again" in response.content.decode()


def test_redelivering_an_inactive_webhook_is_refused_with_the_reason(tenant: Tenant) -> None:
    mine, _ = failed_delivery(tenant, "http://127.0.0.1:9/mine")
    webhooks.webhook_update(webhook=mine.webhook, data={"active": False})
    response = login(tenant, "grace", curator=True).post(f"/webhooks/deliveries/{mine.pk}/redeliver/", follow=True)
    assert "inactive" in response.content.decode()
    assert WebhookDelivery.objects.count() == 1
