"""Webhook deliveries against a real local receiver: signing, retries with backoff, giving up,
SSRF checks, which events fan out to which webhooks, the sweeper, and the API's scoping."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone

from experiences_app import services as experience_services
from memory_app.conversations import services
from memory_app.events.models import MemoryEvent
from memory_app.events.services import event_record
from memory_app.jobs.dispatchers import Sent
from memory_app.models import Webhook, WebhookDelivery
from memory_app.tenancy import services as tenancy
from memory_app.tenancy.models import ApiKey
from memory_app.webhooks import services as webhooks
from tests.conftest import Tenant, make_tenant
from tests.job_dispatch import Sends
from tests.webhook_receiver import WebhookReceiver

Status = WebhookDelivery.Status


@pytest.fixture
def sent(job_outbox: list[Sent]) -> Sends:
    """Record delivery tasks instead of sending them to a broker (in-process tests)."""
    return Sends(job_outbox, webhooks.JOB)


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    server = WebhookReceiver().start()
    yield server
    server.stop()


@pytest.fixture
def admin(db: None) -> Tenant:
    return make_tenant("hooks-admin", role=ApiKey.Role.ADMIN)


def completed_event(tenant: Tenant, **data: Any) -> MemoryEvent:
    session = services.session_create(team=tenant.team)
    return event_record(
        team_id=tenant.team.pk, session=session, kind=MemoryEvent.Kind.COMPACTION_COMPLETED, data={"x": 1, **data}
    )


def hook(tenant: Tenant, url: str, **kwargs: Any) -> tuple[Webhook, str]:
    return webhooks.webhook_create(team=tenant.team, url=url, actor="test", **kwargs)


def only_delivery() -> WebhookDelivery:
    return WebhookDelivery.objects.get()


def test_a_delivery_is_signed_over_the_timestamp_and_body_with_the_secret(
    admin: Tenant, receiver: WebhookReceiver, sent: Sends, django_capture_on_commit_callbacks: Any
) -> None:
    _, secret = hook(admin, receiver.url)
    with django_capture_on_commit_callbacks(execute=True):
        event = completed_event(admin)
    delivery = only_delivery()
    assert sent == [(str(delivery.pk), 0)]

    assert webhooks.webhook_deliver(delivery_id=str(delivery.pk)) == "delivered"
    [request] = receiver.requests
    timestamp, body = request.headers["x-memsite-timestamp"], request.body
    expected = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    assert request.headers["x-memsite-signature"] == f"sha256={expected}"
    assert abs(int(timestamp) - timezone.now().timestamp()) < 300
    assert request.headers["x-memsite-event"] == "compaction_completed"
    assert request.headers["x-memsite-delivery"] == str(delivery.pk)
    assert request.headers["content-type"] == "application/json"
    payload = json.loads(body)
    assert payload["id"] == event.pk and payload["kind"] == "compaction_completed"
    assert payload["data"] == {"x": 1} and payload["session_id"] == str(event.session_id)
    # A different secret or timestamp does not verify.
    forged = hmac.new(b"whsec_other", f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    assert request.headers["x-memsite-signature"] != f"sha256={forged}"
    assert (
        webhooks.webhook_signature(secret=secret, timestamp=str(int(timestamp) + 1), body=body)
        != (request.headers["x-memsite-signature"])
    )
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.response_code) == (Status.DELIVERED, 1, 200)
    assert delivery.delivered_at is not None and delivery.error == ""


def test_a_receiver_failing_twice_then_answering_gets_three_attempts_with_growing_backoff(
    admin: Tenant, receiver: WebhookReceiver, sent: Sends, settings: Any
) -> None:
    settings.WEBHOOK_RETRY_BACKOFF = 2.0
    receiver.statuses = [500, 500, 200]
    hook(admin, receiver.url)
    completed_event(admin)
    delivery_id = str(only_delivery().pk)

    assert webhooks.webhook_deliver(delivery_id=delivery_id) == "retry in 2.0s"
    delivery = only_delivery()
    assert (delivery.status, delivery.attempts, delivery.response_code) == (Status.PENDING, 1, 500)
    assert delivery.error.startswith("HTTP 500")
    # Not due yet: a duplicate task message cannot jump the backoff.
    assert webhooks.webhook_deliver(delivery_id=delivery_id) == "already-claimed"
    WebhookDelivery.objects.filter(pk=delivery_id).update(next_retry_at=timezone.now())  # time passes
    assert webhooks.webhook_deliver(delivery_id=delivery_id) == "retry in 4.0s"
    WebhookDelivery.objects.filter(pk=delivery_id).update(next_retry_at=timezone.now())
    assert webhooks.webhook_deliver(delivery_id=delivery_id) == "delivered"

    assert [countdown for _, countdown in sent] == pytest.approx([2.0, 4.0], abs=0.2)
    delivery = only_delivery()
    assert (delivery.status, delivery.attempts, delivery.response_code, delivery.error) == (
        Status.DELIVERED,
        3,
        200,
        "",
    )
    assert len(receiver.requests) == 3
    assert len({r.headers["x-memsite-delivery"] for r in receiver.requests}) == 1


def test_a_receiver_always_failing_ends_failed_after_the_max_attempts_with_the_reason(
    admin: Tenant, receiver: WebhookReceiver, sent: Sends, settings: Any
) -> None:
    settings.WEBHOOK_RETRY_BACKOFF = 0
    settings.WEBHOOK_MAX_ATTEMPTS = 3
    receiver.default = 503
    hook(admin, receiver.url)
    completed_event(admin)
    delivery_id = str(only_delivery().pk)
    results = [webhooks.webhook_deliver(delivery_id=delivery_id) for _ in range(4)]
    assert results == ["retry in 0.0s", "retry in 0.0s", "failed", "already-claimed"]
    delivery = only_delivery()
    assert (delivery.status, delivery.attempts, delivery.response_code) == (Status.FAILED, 3, 503)
    assert delivery.error.startswith("gave up after 3 attempts: HTTP 503")
    assert len(receiver.requests) == 3


def test_429_waits_at_least_its_retry_after_and_4xx_fails_at_once(
    admin: Tenant, receiver: WebhookReceiver, sent: Sends, settings: Any
) -> None:
    settings.WEBHOOK_RETRY_BACKOFF = 1.0
    receiver.statuses = [429, 410]
    receiver.extra_headers = {"Retry-After": "30"}
    hook(admin, receiver.url)
    completed_event(admin)
    delivery_id = str(only_delivery().pk)
    assert webhooks.webhook_deliver(delivery_id=delivery_id) == "retry in 30.0s"
    WebhookDelivery.objects.filter(pk=delivery_id).update(next_retry_at=None)
    assert webhooks.webhook_deliver(delivery_id=delivery_id) == "failed"
    delivery = only_delivery()
    assert (delivery.status, delivery.attempts, delivery.response_code) == (Status.FAILED, 2, 410)
    assert delivery.error.startswith("HTTP 410")


def test_a_network_error_is_retried_with_the_reason_kept(admin: Tenant, sent: Sends, settings: Any) -> None:
    settings.WEBHOOK_RETRY_BACKOFF = 0
    closed = WebhookReceiver()  # bound, never started, then closed: connections are refused
    url = closed.url
    closed.server.server_close()
    hook(admin, url)
    completed_event(admin)
    assert webhooks.webhook_deliver(delivery_id=str(only_delivery().pk)) == "retry in 0.0s"
    delivery = only_delivery()
    assert delivery.status == Status.PENDING and delivery.response_code is None
    assert delivery.error.startswith("ConnectError")


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://169.254.169.254/latest/meta-data/", "metadata"),
        ("http://169.254.10.1/", "link-local"),
        ("http://[fd00:ec2::254]/", "metadata"),
        ("http://[::ffff:169.254.169.254]/", "metadata"),
        ("http://metadata.google.internal/computeMetadata/v1/", "metadata"),
        ("ftp://example.com/hook", "http or https"),
        ("file:///etc/passwd", "http or https"),
        ("gopher://127.0.0.1/", "http or https"),
        ("http://user:pw@127.0.0.1/", "credentials"),
    ],
)
def test_webhooks_to_metadata_hosts_and_other_schemes_are_refused(admin: Tenant, url: str, reason: str) -> None:
    response = admin.client.post("/api/v1/webhooks/", {"url": url}, format="json")
    assert response.status_code == 400, response.content
    assert reason in response.json()["fields"]["url"][0]
    assert not Webhook.objects.exists()


def test_loopback_targets_need_the_private_targets_setting(admin: Tenant, settings: Any, sent: Sends) -> None:
    assert admin.client.post("/api/v1/webhooks/", {"url": "http://127.0.0.1:9/h"}, format="json").status_code == 201
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = False
    for url in ("http://127.0.0.1:9/h", "http://localhost/h", "http://10.0.0.5/h", "http://[::1]/h"):
        response = admin.client.post("/api/v1/webhooks/", {"url": url}, format="json")
        assert response.status_code == 400 and "private" in response.json()["fields"]["url"][0]
    # The check runs again at send time: the webhook made while it was allowed is refused now.
    completed_event(admin)
    assert webhooks.webhook_deliver(delivery_id=str(only_delivery().pk)) == "failed"
    assert only_delivery().error.startswith("target refused:") and "private" in only_delivery().error


# Hosts no resolver can ever answer for: accepted once as "not resolving yet", they were stored
# and refused only before each send.
MALFORMED_HOSTS = [
    "http://127.0.0.1%2509/hook",
    "http://169.254.169.254%2509/latest/meta-data/",
    "http://127%2E0%2E0%2E1/hook",
    "http://localhost%00/hook",
    "http://hooks.example.com%2F.127.0.0.1/hook",
]


@pytest.mark.parametrize("url", MALFORMED_HOSTS)
def test_a_url_the_sender_would_refuse_is_refused_at_creation_with_why(admin: Tenant, url: str) -> None:
    assert webhooks.webhook_target_problem(url, resolve=True)  # what the sender says before each send

    response = admin.client.post("/api/v1/webhooks/", {"url": url}, format="json")

    assert response.status_code == 400, response.content
    assert "not a valid host name" in response.json()["fields"]["url"][0]
    assert not Webhook.objects.exists()


@pytest.mark.parametrize("url", [*MALFORMED_HOSTS, "http://169.254.169.254/", "http://user:pw@127.0.0.1:9/h"])
def test_an_update_to_a_url_the_policy_refuses_is_400_on_url_and_changes_nothing(admin: Tenant, url: str) -> None:
    webhook, _ = hook(admin, "http://127.0.0.1:9/h")

    response = admin.client.patch(f"/api/v1/webhooks/{webhook.pk}/", {"url": url}, format="json")

    assert response.status_code == 400, response.content
    assert list(response.json()["fields"]) == ["url"] and response.json()["fields"]["url"][0]
    assert Webhook.objects.get().url == "http://127.0.0.1:9/h"


def test_a_host_name_that_does_not_resolve_yet_is_accepted_and_checked_again_before_each_send(
    admin: Tenant, sent: Sends
) -> None:
    response = admin.client.post("/api/v1/webhooks/", {"url": "https://hooks.invalid/in"}, format="json")
    assert response.status_code == 201, response.content
    completed_event(admin)
    assert webhooks.webhook_deliver(delivery_id=str(only_delivery().pk)) == "failed"
    assert "cannot be resolved" in only_delivery().error


def test_events_fan_out_to_the_active_subscribed_webhooks_of_their_team_on_commit(
    admin: Tenant, sent: Sends, django_capture_on_commit_callbacks: Any
) -> None:
    other = make_tenant("hooks-other", role=ApiKey.Role.ADMIN)
    everything, _ = hook(admin, "http://127.0.0.1:9/all")
    facts_only, _ = hook(admin, "http://127.0.0.1:9/facts", event_kinds=["facts_extracted"])
    hook(admin, "http://127.0.0.1:9/off", active=False)
    hook(other, "http://127.0.0.1:9/theirs")
    session = services.session_create(team=admin.team)
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        with transaction.atomic():
            event_record(team_id=admin.team.pk, session=session, kind=MemoryEvent.Kind.COMPACTION_FAILED, data={})
            event_record(team_id=admin.team.pk, session=session, kind=MemoryEvent.Kind.FACTS_EXTRACTED, data={})
            event_record(team_id=admin.team.pk, session=session, kind=MemoryEvent.Kind.RESET, data={})
            assert sent == []  # nothing is sent before the commit
    assert len(callbacks) == 3
    rows = {(d.webhook_id, d.kind) for d in WebhookDelivery.objects.all()}
    assert rows == {
        (everything.pk, "compaction_failed"),
        (everything.pk, "facts_extracted"),
        (facts_only.pk, "facts_extracted"),
    }
    assert len(sent) == 3


def test_a_rolled_back_event_sends_nothing(admin: Tenant, sent: Sends) -> None:
    hook(admin, "http://127.0.0.1:9/all")
    with pytest.raises(RuntimeError), transaction.atomic():
        completed_event(admin)
        raise RuntimeError("the write failed")
    assert not WebhookDelivery.objects.exists() and sent == []


def test_approving_an_experience_is_an_event_webhooks_receive(admin: Tenant, sent: Sends) -> None:
    hook(admin, "http://127.0.0.1:9/all", event_kinds=["experience_approved"])
    experience = experience_services.experience_create(
        team=admin.team, exp_id="retry-politely", who=["planner"], when="w", what="x", actor="tester"
    )
    assert not MemoryEvent.objects.filter(kind="experience_approved").exists()
    experience_services.experience_approve(experience=experience, actor="reviewer")
    experience_services.experience_approve(experience=experience, actor="reviewer")  # no change, no event
    event = MemoryEvent.objects.get(kind="experience_approved")
    assert event.team_id == admin.team.pk and event.session_id is None
    assert event.data["exp_id"] == "retry-politely" and event.data["approved_by"] == "reviewer"
    assert only_delivery().payload["data"]["exp_id"] == "retry-politely"


def test_the_sweeper_resends_lost_deliveries_and_requeues_ones_whose_worker_died(
    admin: Tenant, sent: Sends, settings: Any
) -> None:
    settings.WEBHOOK_MAX_ATTEMPTS = 2
    hook(admin, "http://127.0.0.1:9/all")
    lost, stuck, dead = (completed_event(admin) for _ in range(3))
    long_ago = timezone.now() - timedelta(hours=1)
    by_event = {d.event_id: d for d in WebhookDelivery.objects.all()}
    WebhookDelivery.objects.filter(pk=by_event[lost.pk].pk).update(created_at=long_ago)
    WebhookDelivery.objects.filter(pk=by_event[stuck.pk].pk).update(
        status=Status.SENDING, attempts=1, claimed_at=long_ago
    )
    WebhookDelivery.objects.filter(pk=by_event[dead.pk].pk).update(
        status=Status.SENDING, attempts=2, claimed_at=long_ago
    )
    sent.clear()
    assert webhooks.webhook_delivery_sweep() == {"resent": 1, "requeued": 1, "failed": 1}
    assert sorted(pk for pk, _ in sent) == sorted([str(by_event[lost.pk].pk), str(by_event[stuck.pk].pk)])
    assert WebhookDelivery.objects.get(pk=by_event[stuck.pk].pk).status == Status.PENDING
    assert WebhookDelivery.objects.get(pk=by_event[dead.pk].pk).status == Status.FAILED
    sent.clear()
    assert webhooks.webhook_delivery_sweep() == {"resent": 0, "requeued": 0, "failed": 0}


# --- the API -----------------------------------------------------------------------------------


def test_the_secret_is_shown_once_at_creation_and_masked_after(admin: Tenant) -> None:
    response = admin.client.post(
        "/api/v1/webhooks/",
        {"url": "http://127.0.0.1:9/h", "event_kinds": ["compaction_completed"], "description": "ci"},
        format="json",
    )
    assert response.status_code == 201, response.content
    created = response.json()
    secret = created["secret"]
    assert secret.startswith("whsec_") and len(secret) > 40
    assert Webhook.objects.get().secret == secret
    for body in (
        admin.client.get("/api/v1/webhooks/").json()[0],
        admin.client.get(f"/api/v1/webhooks/{created['id']}/").json(),
    ):
        assert secret not in json.dumps(body)
        assert body["secret"].endswith("…") and len(body["secret"]) < 15
        assert body["event_kinds"] == ["compaction_completed"]


def test_read_and_write_keys_see_webhooks_but_cannot_change_them(admin: Tenant) -> None:
    webhook, _ = hook(admin, "http://127.0.0.1:9/h")
    for role in (ApiKey.Role.READ, ApiKey.Role.WRITE):
        _, raw = tenancy.api_key_create(team=admin.team, name=f"{role}-key", role=role)
        client = admin.client.__class__()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
        assert client.get("/api/v1/webhooks/").status_code == 200
        assert client.post("/api/v1/webhooks/", {"url": "http://127.0.0.1:9/x"}, format="json").status_code == 403
        assert client.patch(f"/api/v1/webhooks/{webhook.pk}/", {"active": False}, format="json").status_code == 403
        assert client.delete(f"/api/v1/webhooks/{webhook.pk}/").status_code == 403
    assert Webhook.objects.count() == 1 and Webhook.objects.get().active


def test_read_and_write_keys_see_webhook_urls_masked_and_admin_keys_see_them_whole(admin: Tenant) -> None:
    webhook, _ = hook(admin, "https://hooks.example.com/in?token=abc123&team=ops")
    # A row stored before credentials in URLs were refused.
    Webhook.objects.filter(pk=webhook.pk).update(url="https://bob:pw@hooks.example.com/in?token=abc123&team=ops")
    masked = "https://[redacted]@hooks.example.com/in?token=[redacted]&team=[redacted]"
    for role in (ApiKey.Role.READ, ApiKey.Role.WRITE):
        _, raw = tenancy.api_key_create(team=admin.team, name=f"{role}-key", role=role)
        client = admin.client.__class__()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
        listed = client.get("/api/v1/webhooks/").json()[0]
        one = client.get(f"/api/v1/webhooks/{webhook.pk}/").json()
        assert listed["url"] == one["url"] == masked, role
    whole = "https://bob:pw@hooks.example.com/in?token=abc123&team=ops"
    assert admin.client.get("/api/v1/webhooks/").json()[0]["url"] == whole
    assert admin.client.get(f"/api/v1/webhooks/{webhook.pk}/").json()["url"] == whole
    edited = admin.client.patch(f"/api/v1/webhooks/{webhook.pk}/", {"description": "ops"}, format="json")
    assert edited.json()["url"] == whole
    created = admin.client.post("/api/v1/webhooks/", {"url": "https://hooks.example.com/b?k=v"}, format="json")
    assert created.json()["url"] == "https://hooks.example.com/b?k=v"


def test_another_teams_webhooks_and_deliveries_are_invisible(admin: Tenant, sent: Sends) -> None:
    other = make_tenant("hooks-beta", role=ApiKey.Role.ADMIN)
    theirs, _ = hook(other, "http://127.0.0.1:9/theirs")
    completed_event(other)
    delivery = only_delivery()
    assert admin.client.get("/api/v1/webhooks/").json() == []
    for method, path in (
        ("get", f"/api/v1/webhooks/{theirs.pk}/"),
        ("patch", f"/api/v1/webhooks/{theirs.pk}/"),
        ("delete", f"/api/v1/webhooks/{theirs.pk}/"),
        ("get", f"/api/v1/webhooks/{theirs.pk}/deliveries/"),
        ("post", f"/api/v1/webhooks/{theirs.pk}/deliveries/{delivery.pk}/redeliver/"),
    ):
        response = getattr(admin.client, method)(path, {}, format="json")
        assert response.status_code == 404, (method, path)
        assert response.json()["error"] == "not_found"
    assert Webhook.objects.get(pk=theirs.pk).active


def test_the_delivery_log_lists_attempts_and_a_failed_one_can_be_redelivered(
    admin: Tenant, receiver: WebhookReceiver, sent: Sends, settings: Any
) -> None:
    settings.WEBHOOK_MAX_ATTEMPTS = 1
    receiver.statuses = [500]
    webhook, _ = hook(admin, receiver.url)
    completed_event(admin)
    first = only_delivery()
    webhooks.webhook_deliver(delivery_id=str(first.pk))
    log = admin.client.get(f"/api/v1/webhooks/{webhook.pk}/deliveries/").json()
    assert log["count"] == 1
    row = log["results"][0]
    assert (row["status"], row["attempts"], row["response_code"]) == ("failed", 1, 500)
    assert row["error"].startswith("gave up after 1 attempts: HTTP 500")

    _, raw = tenancy.api_key_create(team=admin.team, name="writer", role=ApiKey.Role.WRITE)
    writer = admin.client.__class__()
    writer.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert writer.post(f"/api/v1/webhooks/{webhook.pk}/deliveries/{first.pk}/redeliver/").status_code == 403

    response = admin.client.post(f"/api/v1/webhooks/{webhook.pk}/deliveries/{first.pk}/redeliver/")
    assert response.status_code == 202, response.content
    again = response.json()
    assert again["status"] == "pending" and again["redelivery_of"] == str(first.pk)
    assert webhooks.webhook_deliver(delivery_id=again["id"]) == "delivered"
    statuses = admin.client.get(f"/api/v1/webhooks/{webhook.pk}/deliveries/?status=delivered").json()
    assert [d["id"] for d in statuses["results"]] == [again["id"]]
    pending_again = admin.client.post(f"/api/v1/webhooks/{webhook.pk}/deliveries/{again['id']}/redeliver/")
    assert pending_again.status_code == 202  # delivered ones can be sent again too


def test_bad_webhook_input_names_the_field_and_changes_nothing(admin: Tenant) -> None:
    response = admin.client.post(
        "/api/v1/webhooks/", {"url": "http://127.0.0.1:9/h", "event_kinds": ["reset"]}, format="json"
    )
    assert response.status_code == 400 and "event_kinds[0]" in response.json()["fields"]
    response = admin.client.post("/api/v1/webhooks/", {"event_kinds": []}, format="json")
    assert response.status_code == 400 and {"url", "event_kinds"} <= set(response.json()["fields"])
    assert not Webhook.objects.exists()
    webhook, _ = hook(admin, "http://127.0.0.1:9/h")
    response = admin.client.patch(f"/api/v1/webhooks/{webhook.pk}/", {"url": "http://169.254.169.254/"}, format="json")
    assert response.status_code == 400 and "url" in response.json()["fields"]
    assert Webhook.objects.get().url == "http://127.0.0.1:9/h"
    response = admin.client.patch(f"/api/v1/webhooks/{webhook.pk}/", {"active": False}, format="json")
    assert response.status_code == 200 and response.json()["active"] is False
    assert admin.client.delete(f"/api/v1/webhooks/{webhook.pk}/").status_code == 204
    assert not Webhook.objects.exists()
