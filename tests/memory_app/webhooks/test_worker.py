"""Webhooks sent by a real Celery worker process: a compaction the worker runs writes
compaction_completed, and the same worker delivers it, signed, to a local receiver (retrying
through a 500 first). On the embedded defaults the broker is the filesystem one and the database
the SQLite test file; in CI's second run, Redis and PostgreSQL."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Callable, Iterator

import pytest

from memory_app.models import WebhookDelivery
from memory_app.webhooks import services as webhooks
from tests.conftest import fill, managed_session
from tests.webhook_receiver import WebhookReceiver
from tests.worker_process import Worker, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def worker_env() -> dict[str, str]:
    return {"MEMSITE_WEBHOOK_RETRY_BACKOFF": "0.2", "MEMSITE_WEBHOOK_ALLOW_PRIVATE_TARGETS": "1"}


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    server = WebhookReceiver(statuses=[500]).start()
    yield server
    server.stop()


def test_a_worker_delivers_the_webhook_of_a_compaction_it_completed(
    start_worker: Callable[[], Worker], receiver: WebhookReceiver
) -> None:
    start_worker()
    session = managed_session()
    _, secret = webhooks.webhook_create(
        team=session.team, url=receiver.url, actor="test", event_kinds=["compaction_completed"]
    )
    fill(session)  # crosses the threshold: the worker compacts, the event queues the delivery

    def delivered() -> bool:
        return WebhookDelivery.objects.filter(status=WebhookDelivery.Status.DELIVERED).exists()

    wait_for(delivered, timeout=90, what="the webhook delivery")
    delivery = WebhookDelivery.objects.get()
    assert (delivery.kind, delivery.attempts, delivery.response_code) == ("compaction_completed", 2, 200)
    first, second = receiver.requests
    assert first.headers["x-memsite-delivery"] == second.headers["x-memsite-delivery"] == str(delivery.pk)
    timestamp = second.headers["x-memsite-timestamp"]
    expected = hmac.new(secret.encode(), f"{timestamp}.".encode() + second.body, hashlib.sha256).hexdigest()
    assert second.headers["x-memsite-signature"] == f"sha256={expected}"
    body = json.loads(second.body)
    assert body["kind"] == "compaction_completed" and body["session_id"] == str(session.pk)
    assert body["data"]["run_id"] and body["data"]["status"] == "completed"
