"""The webhook pages in Debian's chromium at phone and desktop width: the delivery log fits with its
errors readable and Redeliver in sight, redelivering keeps the log's filter, and an admin creates,
edits, disables, enables and tests a webhook whose test delivery (sent by an in-process worker to
a real local receiver) shows its payload and answer."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import Page, ViewportSize, expect

from memory_app.conversations import services
from memory_app.events.models import MemoryEvent
from memory_app.events.services import event_record
from memory_app.models import Webhook, WebhookDelivery
from memory_app.webhooks import services as webhooks
from tests.browser_kit import DESKTOP, PHONE, WIDTHS, browser, check_page, member, open_page
from tests.webhook_receiver import WebhookReceiver

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

Status = WebhookDelivery.Status
LONG_ERROR = (
    "gave up after 5 attempts: HTTP 502: <html><head><title>502 Bad Gateway</title></head><body><center>"
    "<h1>502 Bad Gateway</h1></center><hr><center>nginx/1.25.3 upstream "
    "https://hooks.example-receiver.internal/memsite/v1/events?token=averyveryverylongtokenwithoutanyspaces"
    "0123456789abcdef timed out</center></body></html>"
)


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    server = WebhookReceiver(default=200).start()
    yield server
    server.stop()


def build_log() -> str:
    """A team with two webhooks and a log of failed, delivered and pending deliveries; the id of
    the newest failed one."""
    team, _ = member("demo", "ada", admin=True)
    session = services.session_create(team=team, external_id="coding-session-240")
    long_url = "https://hooks.example-receiver.internal/memsite/v1/events/compaction-and-facts?team=demo&route=primary"
    webhooks.webhook_create(team=team, url=long_url, actor="t", description="ops alerts for the compaction queue")
    webhooks.webhook_create(team=team, url="http://127.0.0.1:9/kg", actor="t", event_kinds=["facts_extracted"])
    for index in range(12):
        kind = MemoryEvent.Kind.COMPACTION_FAILED if index % 3 else MemoryEvent.Kind.FACTS_EXTRACTED
        event_record(team_id=team.pk, session=session, kind=kind, data={"run_id": f"run-{index}", "error": "boom"})
    deliveries = list(WebhookDelivery.objects.order_by("created_at"))
    for index, delivery in enumerate(deliveries):
        status = [Status.FAILED, Status.DELIVERED, Status.PENDING][index % 3]
        WebhookDelivery.objects.filter(pk=delivery.pk).update(
            status=status,
            attempts=5 if status == Status.FAILED else 1,
            response_code={Status.FAILED: 502, Status.DELIVERED: 200}.get(status),
            error=LONG_ERROR if status == Status.FAILED else "",
            next_retry_at=timezone.now() + timedelta(seconds=30) if status == Status.PENDING else None,
        )
    return str(WebhookDelivery.objects.filter(status=Status.FAILED).order_by("-created_at", "-pk").first().pk)


def box(page: Page, selector: str) -> dict[str, float]:
    found = page.locator(selector).first.bounding_box()
    assert found is not None, selector
    return found


@pytest.mark.parametrize("viewport", WIDTHS, ids=lambda v: str(v["width"]))
def test_the_delivery_log_fits_and_redelivering_keeps_the_filter(live_server, viewport: ViewportSize) -> None:
    newest_failed = build_log()
    with browser() as opened:
        page = open_page(opened, live_server.url, viewport=viewport)
        page.goto(live_server.url + "/webhooks/?status=failed")
        expect(page.get_by_role("heading", name="Delivery log")).to_be_visible()
        check_page(page, "webhooks")

        row = f"#delivery-{newest_failed}"
        redeliver = box(page, f"{row} button:has-text('Redeliver')")
        scroller = box(page, ".delivery-log .table-scroll")
        width = viewport["width"]
        # Redeliver is in sight without scrolling sideways: inside the viewport and the table's box.
        assert (
            0 <= redeliver["x"]
            and redeliver["x"] + redeliver["width"] <= min(width, scroller["x"] + scroller["width"]) + 1
        )
        # Every column of the row is in sight at once: a phone shows the delivery as a card.
        for label in ("Created", "Status", "Event", "Webhook", "Tries", "HTTP", "Error"):
            cell = box(page, f"{row} td[data-label='{label}']")
            assert 0 <= cell["x"] and cell["x"] + min(cell["width"], 60) <= width + 1, label
        if viewport == DESKTOP:
            # The error reads as prose: a wide column and a compact row, not a letter per line.
            error = box(page, f"{row} .error-text")
            assert error["width"] >= 250 and box(page, row)["height"] <= 130

        page.locator(f"{row} button:has-text('Redeliver')").click()
        expect(page.locator(".flash")).to_contain_text("Queued again")
        assert page.url.endswith("/webhooks/?status=failed")
        expect(
            page.get_by_role("navigation", name="Delivery status").get_by_role("link", name="failed")
        ).to_have_attribute("aria-current", "page")
        expect(page.locator("table.deliveries .status-pill.status-pending")).to_have_count(0)

        page.locator(f"{row} a:has-text('Details')").click()
        expect(page.get_by_role("heading", name="Payload")).to_be_visible()
        expect(page.locator("pre.payload")).to_contain_text('"kind": "compaction_failed"')
        expect(page.locator("pre.delivery-error")).to_contain_text("502 Bad Gateway")
        check_page(page, "webhook-delivery-failed")


@pytest.mark.parametrize("viewport", [PHONE, DESKTOP], ids=lambda v: str(v["width"]))
def test_an_admin_creates_edits_disables_and_tests_a_webhook(
    live_server, run_jobs_inline, receiver: WebhookReceiver, viewport: ViewportSize
) -> None:
    run_jobs_inline(webhooks.JOB).background = True  # a worker sends each delivery as it is queued
    member("demo", "ada", admin=True)
    with browser() as opened:
        page = open_page(opened, live_server.url, viewport=viewport)
        page.goto(live_server.url + "/webhooks/")
        check_page(page, "webhooks-empty")
        page.get_by_role("link", name="New webhook").click()

        # A bad URL and no events: both errors at once, on their fields, focus on the first.
        page.get_by_label("Payload URL").fill("ftp://127.0.0.1/hook")
        for box_ in page.get_by_role("group", name="Events").get_by_role("checkbox").all():
            box_.uncheck()
        page.get_by_role("button", name="Create webhook").click()
        expect(page.locator("#id_url_error")).to_contain_text("http")
        expect(page.locator("#id_event_kinds_error")).to_contain_text("Choose at least one event")
        expect(page.get_by_label("Payload URL")).to_be_focused()
        check_page(page, "webhook-new-errors")

        page.get_by_label("Payload URL").fill(receiver.url)
        page.get_by_label("Description").fill("receiver on this machine")
        page.get_by_label("compaction completed").check()
        page.get_by_label("facts extracted").check()
        page.get_by_role("button", name="Create webhook").click()
        expect(page.get_by_role("heading", name="Signing secret")).to_be_visible()
        secret = page.locator("#new-secret").inner_text()
        assert secret.startswith("whsec_")
        check_page(page, "webhook-detail")

        page.get_by_label("Description").fill("the local receiver")
        page.get_by_label("experience approved").check()
        page.get_by_role("button", name="Save").click()
        expect(page.locator(".flash")).to_contain_text("Webhook saved.")
        expect(page.get_by_role("heading", name="Signing secret")).to_have_count(0)  # shown once only

        page.get_by_role("button", name="Disable").click()
        expect(page.locator("h1 .status-pill")).to_have_text("inactive")
        expect(page.get_by_role("button", name="Send test")).to_have_count(0)
        page.get_by_role("button", name="Enable").click()
        expect(page.locator("h1 .status-pill")).to_have_text("active")

        page.get_by_role("button", name="Send test").click()
        expect(page.locator(".flash")).to_contain_text("Test delivery queued")
        for _ in range(20):  # the worker thread sends it within moments
            if page.locator("h1 .status-pill").inner_text() == "delivered":
                break
            page.wait_for_timeout(250)
            page.reload()
        expect(page.locator("h1 .status-pill")).to_have_text("delivered")
        expect(page.locator("pre.payload")).to_contain_text('"kind": "webhook_test"')
        expect(page.locator("pre.response-body")).to_contain_text('"received": 200')
        expect(page.locator("table.headers")).to_contain_text("X-Memsite-Signature")
        assert secret not in page.content()
        check_page(page, "webhook-delivery")

    webhook = Webhook.objects.get()
    assert (webhook.description, len(webhook.event_kinds), webhook.active) == ("the local receiver", 3, True)
    assert [request.headers["x-memsite-event"] for request in receiver.requests] == ["webhook_test"]
