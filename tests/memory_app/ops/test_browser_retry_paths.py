"""In Debian's chromium, with real failures: a compaction fails because the LLM server answers
500, and the webhook delivery of that failure fails because the receiver answers 500. An
operator retries the compaction from the ops page and redelivers the webhook from the webhooks
page; a real Celery worker runs both again, and this time the LLM and the receiver answer."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, expect

from memory_app.compaction import services as compaction
from memory_app.compaction.models import CompactionRun
from memory_app.conversations import services
from memory_app.models import WebhookDelivery
from memory_app.webhooks import services as webhooks
from tests.browser_kit import DESKTOP, PHONE, browser, check_page, member, open_page
from tests.conftest import fill
from tests.llm_server import Fail
from tests.webhook_receiver import WebhookReceiver
from tests.worker_process import wait_for

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def worker_env() -> dict[str, str]:
    # One attempt each: the first failure is final, so only the operator's retry can mend it.
    return {
        "MEMSITE_COMPACTION_MAX_ATTEMPTS": "1",
        "MEMSITE_WEBHOOK_MAX_ATTEMPTS": "1",
        "MEMSITE_WEBHOOK_ALLOW_PRIVATE_TARGETS": "1",
    }


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    server = WebhookReceiver(statuses=[500]).start()  # the first delivery fails, later ones land
    yield server
    server.stop()


def reload_until(page: Page, selector: str, *, seconds: int = 60) -> None:
    """The webhooks page does not poll: reload it until `selector` shows."""
    for _ in range(seconds):
        if page.locator(selector).count():
            return
        page.wait_for_timeout(1000)
        page.reload()
    raise AssertionError(f"{selector} never showed")


def test_a_failed_compaction_is_retried_and_a_failed_webhook_redelivered_end_to_end(
    live_server, start_worker, llm_server, receiver: WebhookReceiver, settings
) -> None:
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = True
    team, _ = member("demo", "ada", admin=True)
    session = services.session_create(
        team=team,
        external_id="trip-planner",
        system_prompt="You are a planner.",
        memory_type="managed_conversation",
        memory_config={"threshold_tokens": 100_000},  # no automatic compaction: the test asks for one
    )
    fill(session)
    webhooks.webhook_create(team=team, url=receiver.url, actor="test", event_kinds=["compaction_failed"])
    llm_server.script(Fail(500))  # the compaction's one attempt; later calls get a summary
    start_worker()
    failed_run, _ = compaction.compaction_request(session=session, trigger=CompactionRun.Trigger.MANUAL)
    wait_for(
        lambda: WebhookDelivery.objects.filter(status=WebhookDelivery.Status.FAILED).exists(),
        timeout=90,
        what="the compaction to fail and the webhook of its failure to fail",
    )
    assert CompactionRun.objects.get(pk=failed_run.pk).status == "failed"

    with browser() as opened:
        page = open_page(opened, live_server.url, viewport=DESKTOP)
        page.goto(live_server.url + "/ops/")
        failure = page.locator("#queue-compaction table.failures tbody tr")
        expect(failure).to_contain_text("500")
        failure.get_by_role("button", name="Retry").click()
        expect(page.locator(".flash")).to_contain_text("queued a new job for session trip-planner")
        # The session page follows the new run to the end.
        page.goto(live_server.url + f"/sessions/{session.pk}/")
        status = page.locator("#compaction-panel").get_by_role("status")
        expect(status).to_contain_text("Latest compaction", timeout=60_000)
        expect(status.locator(".status-pill")).to_have_text("done")

        phone = open_page(opened, live_server.url, viewport=PHONE)
        phone.goto(live_server.url + "/webhooks/?status=failed")
        row = phone.locator("tbody tr[id^=delivery-]").first
        expect(row).to_contain_text("500")
        row.get_by_role("button", name="Redeliver").click()
        expect(phone.locator(".flash")).to_be_visible()
        phone.goto(live_server.url + "/webhooks/?status=delivered")
        reload_until(phone, "tbody tr[id^=delivery-] .status-delivered")
        check_page(phone, "webhooks-redelivered")

    assert CompactionRun.objects.filter(session=session, status="done").count() == 1
    redelivered = WebhookDelivery.objects.get(status=WebhookDelivery.Status.DELIVERED)
    assert redelivered.redelivery_of is not None and redelivered.response_code == 200
    assert [r.headers["x-memsite-delivery"] for r in receiver.requests] == [
        str(redelivered.redelivery_of_id),
        str(redelivered.pk),
    ]
