"""The dashboard's webhook pages: the list and the delivery log (filtered, sorted, paginated),
creating, editing, disabling, testing, rotating and deleting a webhook (team admins only, own team
only), and one delivery's payload, headers and answer."""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Iterator

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from memory_app.conversations import services
from memory_app.events.models import MemoryEvent
from memory_app.events.services import event_record
from memory_app.jobs.dispatchers import Sent
from memory_app.models import Webhook, WebhookDelivery
from memory_app.tenancy.models import TeamMembership
from memory_app.webhooks import services as webhooks
from tests.conftest import Tenant, make_tenant
from tests.job_dispatch import Sends
from tests.webhook_receiver import WebhookReceiver

Status = WebhookDelivery.Status
ALL_KINDS = ["compaction_completed", "compaction_failed", "facts_extracted", "experience_approved"]


@pytest.fixture(autouse=True)
def sent(job_outbox: list[Sent]) -> Sends:
    return Sends(job_outbox, webhooks.JOB)


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    server = WebhookReceiver(default=202).start()
    yield server
    server.stop()


def login(tenant: Tenant, name: str, *, curator: bool) -> Client:
    user = get_user_model().objects.create_user(name, password="pw-0123456789")
    TeamMembership.objects.create(team=tenant.team, user=user, is_admin=curator)
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def admin(tenant: Tenant) -> Client:
    return login(tenant, "grace", curator=True)


@pytest.fixture
def member(tenant: Tenant) -> Client:
    return login(tenant, "ada", curator=False)


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


def form_data(**changes: object) -> dict[str, object]:
    return {"url": "http://127.0.0.1:9/hook", "description": "ci", "event_kinds": ALL_KINDS, "active": "on", **changes}


# --- the list and the log -----------------------------------------------------------------------


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
    assert "Redeliver" in html and f'href="/webhooks/deliveries/{mine.pk}/"' in html
    assert 'href="/webhooks/" aria-current="page"' in html  # the nav entry
    assert "Redeliver" not in login(tenant, "ada", curator=False).get("/webhooks/").content.decode()
    filtered = login(tenant, "lin", curator=True).get("/webhooks/?status=delivered").content.decode()
    assert f'id="delivery-{mine.pk}"' not in filtered


def test_the_log_filters_by_webhook_and_event_and_sorts_on_the_server(tenant: Tenant, admin: Client) -> None:
    first, _ = failed_delivery(tenant, "http://127.0.0.1:9/first")
    second, _ = failed_delivery(tenant, "http://127.0.0.1:9/second")
    test = webhooks.webhook_send_test(webhook=second.webhook, actor="t")

    by_hook = admin.get(f"/webhooks/?webhook={first.webhook_id}").content.decode()
    assert f"delivery-{first.pk}" in by_hook and f"delivery-{second.pk}" not in by_hook
    by_kind = admin.get("/webhooks/?kind=webhook_test").content.decode()
    assert f"delivery-{test.pk}" in by_kind and f"delivery-{first.pk}" not in by_kind
    oldest = admin.get("/webhooks/?order=oldest").content.decode()
    assert oldest.index(f"delivery-{first.pk}") < oldest.index(f"delivery-{test.pk}")
    newest = admin.get("/webhooks/").content.decode()
    assert newest.index(f"delivery-{test.pk}") < newest.index(f"delivery-{first.pk}")
    # Values the page does not know show everything rather than failing.
    assert admin.get("/webhooks/?webhook=nope&kind=nope&order=nope&status=nope").status_code == 200


def test_the_log_paginates_with_the_filters_kept(tenant: Tenant, admin: Client) -> None:
    delivery, _ = failed_delivery(tenant, "http://127.0.0.1:9/many")
    WebhookDelivery.objects.bulk_create(
        WebhookDelivery(team=tenant.team, webhook=delivery.webhook, kind=delivery.kind, status=Status.FAILED)
        for _ in range(55)
    )
    html = admin.get("/webhooks/?status=failed").content.decode()
    assert html.count('id="delivery-') == 50
    assert 'href="?status=failed&amp;page=2"' in html
    assert admin.get("/webhooks/?status=failed&page=2").content.decode().count('id="delivery-') == 6


def test_the_log_reads_a_fixed_number_of_queries_whatever_its_length(
    tenant: Tenant, admin: Client, django_assert_max_num_queries
) -> None:
    delivery, _ = failed_delivery(tenant, "http://127.0.0.1:9/q")
    admin.get("/webhooks/")  # the session and team lookups warm up
    WebhookDelivery.objects.bulk_create(
        WebhookDelivery(team=tenant.team, webhook=delivery.webhook, kind=delivery.kind) for _ in range(30)
    )
    with django_assert_max_num_queries(12):
        assert admin.get("/webhooks/").status_code == 200


# --- redelivery ---------------------------------------------------------------------------------


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


def test_redeliver_returns_to_the_log_with_its_filter_kept(tenant: Tenant, admin: Client) -> None:
    mine, _ = failed_delivery(tenant, "http://127.0.0.1:9/mine")
    back = "/webhooks/?status=failed&kind=compaction_failed&page=1"
    response = admin.post(f"/webhooks/deliveries/{mine.pk}/redeliver/", {"next": back})
    assert response.status_code == 302 and response["Location"] == back
    # Another site is never a place to go back to.
    elsewhere = admin.post(f"/webhooks/deliveries/{mine.pk}/redeliver/", {"next": "https://evil.example/"})
    assert elsewhere["Location"].startswith("/webhooks/deliveries/")


def test_redelivering_an_inactive_webhook_is_refused_with_the_reason(tenant: Tenant) -> None:
    mine, _ = failed_delivery(tenant, "http://127.0.0.1:9/mine")
    webhooks.webhook_update(webhook=mine.webhook, data={"active": False})
    response = login(tenant, "grace", curator=True).post(f"/webhooks/deliveries/{mine.pk}/redeliver/", follow=True)
    assert "inactive" in response.content.decode()
    assert WebhookDelivery.objects.count() == 1


# --- creating and editing -----------------------------------------------------------------------


def test_an_admin_creates_a_webhook_and_sees_its_secret_once(tenant: Tenant, admin: Client) -> None:
    form = admin.get("/webhooks/new/").content.decode()
    assert 'name="url"' in form and form.count('name="event_kinds"') == 4

    response = admin.post("/webhooks/new/", form_data(event_kinds=["facts_extracted"], description="kg"))
    webhook = Webhook.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/webhooks/{webhook.pk}/"
    assert (webhook.url, webhook.event_kinds, webhook.active) == ("http://127.0.0.1:9/hook", ["facts_extracted"], True)
    assert webhook.created_by == "user:grace"
    shown = admin.get(response["Location"]).content.decode()
    assert webhook.secret in shown and "shown this once" in shown
    again = admin.get(response["Location"]).content.decode()
    assert webhook.secret not in again and webhook.secret_hint in again


@pytest.mark.parametrize(
    ("data", "field", "message"),
    [
        (form_data(url=""), "url", "This field is required."),
        (form_data(url="ftp://127.0.0.1/x"), "url", "http"),
        (form_data(url="http://user:pw@127.0.0.1:9/x"), "url", "credentials in the URL"),
        (form_data(url="http://127.0.0.1%2509/hook"), "url", "not a valid host name"),
        (form_data(event_kinds=[]), "event_kinds", "Choose at least one event"),
        (form_data(event_kinds=["reset"]), "event_kinds", "not one of the available choices"),
    ],
)
def test_bad_input_is_shown_on_its_field_and_creates_nothing(
    admin: Client, data: dict[str, object], field: str, message: str
) -> None:
    response = admin.post("/webhooks/new/", data)
    assert response.status_code == 400
    html = response.content.decode()
    errors = re.search(rf'<ul class="errorlist" id="id_{field}_error">(.*?)</ul>', html, re.S)
    assert errors and message in errors.group(1)
    if field == "url":
        assert re.search(r'<input[^>]*aria-invalid="true"[^>]*aria-describedby="[^"]*id_url_error', html)
    else:
        assert 'aria-describedby="id_event_kinds_error"' in html
    assert Webhook.objects.count() == 0


def test_an_admin_edits_url_events_and_description(tenant: Tenant, admin: Client) -> None:
    webhook, _ = webhooks.webhook_create(team=tenant.team, url="http://127.0.0.1:9/old", actor="t")
    response = admin.post(
        f"/webhooks/{webhook.pk}/edit/",
        form_data(url="http://127.0.0.1:9/new", event_kinds=["compaction_failed"], description="ops", active=""),
    )
    assert response.status_code == 302
    webhook.refresh_from_db()
    assert (webhook.url, webhook.event_kinds, webhook.description, webhook.active) == (
        "http://127.0.0.1:9/new",
        ["compaction_failed"],
        "ops",
        False,
    )


def test_a_rejected_edit_shows_the_errors_and_changes_nothing(tenant: Tenant, admin: Client) -> None:
    webhook, _ = webhooks.webhook_create(team=tenant.team, url="http://127.0.0.1:9/keep", actor="t")
    response = admin.post(f"/webhooks/{webhook.pk}/edit/", form_data(url="not a url", event_kinds=[]))
    assert response.status_code == 400
    html = response.content.decode()
    assert 'id="id_url_error"' in html and 'id="id_event_kinds_error"' in html
    assert 'value="not a url"' in html  # what was typed stays to be corrected
    webhook.refresh_from_db()
    assert webhook.url == "http://127.0.0.1:9/keep" and webhook.event_kinds == ALL_KINDS


def test_an_edit_to_a_url_the_sender_would_refuse_is_shown_on_the_url_field_and_changes_nothing(
    tenant: Tenant, admin: Client
) -> None:
    webhook, _ = webhooks.webhook_create(team=tenant.team, url="http://127.0.0.1:9/keep", actor="t")
    response = admin.post(f"/webhooks/{webhook.pk}/edit/", form_data(url="http://169.254.169.254%2509/latest/"))
    assert response.status_code == 400
    errors = re.search(r'<ul class="errorlist" id="id_url_error">(.*?)</ul>', response.content.decode(), re.S)
    assert errors and "not a valid host name" in errors.group(1)
    webhook.refresh_from_db()
    assert webhook.url == "http://127.0.0.1:9/keep"


def test_disable_and_enable_say_which_state_they_want(tenant: Tenant, admin: Client) -> None:
    webhook, _ = webhooks.webhook_create(team=tenant.team, url="http://127.0.0.1:9/x", actor="t")
    for _ in range(2):  # a double submit leaves it disabled
        admin.post(f"/webhooks/{webhook.pk}/active/", {"active": "0"})
    webhook.refresh_from_db()
    assert webhook.active is False
    page = admin.get("/webhooks/").content.decode()
    assert "inactive" in page and ">Enable<" in page.replace(
        '<span class="visually-hidden"> http://127.0.0.1:9/x</span>', ""
    )
    admin.post(f"/webhooks/{webhook.pk}/active/", {"active": "1"})
    webhook.refresh_from_db()
    assert webhook.active is True


def test_rotating_the_secret_shows_the_new_one_once(tenant: Tenant, admin: Client) -> None:
    webhook, old = webhooks.webhook_create(team=tenant.team, url="http://127.0.0.1:9/x", actor="t")
    response = admin.post(f"/webhooks/{webhook.pk}/secret/", follow=True)
    webhook.refresh_from_db()
    assert webhook.secret != old and webhook.secret_hint == webhook.secret[:10]
    assert webhook.secret in response.content.decode() and old not in response.content.decode()
    assert webhook.secret not in admin.get(f"/webhooks/{webhook.pk}/").content.decode()


def test_deleting_a_webhook_removes_it_and_its_log(tenant: Tenant, admin: Client) -> None:
    delivery, _ = failed_delivery(tenant, "http://127.0.0.1:9/gone")
    response = admin.post(f"/webhooks/{delivery.webhook_id}/delete/", follow=True)
    assert "Deleted the webhook" in response.content.decode()
    assert not Webhook.objects.exists() and not WebhookDelivery.objects.exists()


# --- send test and the delivery page ---------------------------------------------------------------


def test_send_test_goes_through_the_delivery_path_and_its_page_shows_what_was_sent(
    tenant: Tenant, admin: Client, sent: Sends, receiver: WebhookReceiver, django_capture_on_commit_callbacks
) -> None:
    webhook, secret = webhooks.webhook_create(team=tenant.team, url=receiver.url, actor="t")
    with django_capture_on_commit_callbacks(execute=True):
        response = admin.post(f"/webhooks/{webhook.pk}/test/")
    delivery = WebhookDelivery.objects.get()
    assert response["Location"] == f"/webhooks/deliveries/{delivery.pk}/"
    assert (delivery.kind, delivery.status, sent.ids) == ("webhook_test", Status.PENDING, [str(delivery.pk)])

    assert webhooks.webhook_deliver(delivery_id=str(delivery.pk)) == "delivered"  # what the worker runs
    (request,) = receiver.requests
    timestamp = request.headers["x-memsite-timestamp"]
    expected = hmac.new(secret.encode(), f"{timestamp}.".encode() + request.body, hashlib.sha256).hexdigest()
    assert request.headers["x-memsite-signature"] == f"sha256={expected}"
    assert json.loads(request.body)["data"]["webhook_id"] == str(webhook.pk)

    html = admin.get(response["Location"]).content.decode()
    assert "HTTP 202" in html and "{&quot;received&quot;: 202}" in html  # the answer's body excerpt
    assert "&quot;kind&quot;: &quot;webhook_test&quot;" in html  # the payload, pretty-printed
    assert "X-Memsite-Signature" in html and secret not in html and expected not in html
    assert re.search(r"\d+ ms", html)
    assert f'id="delivery-{delivery.pk}"' in admin.get(f"/webhooks/{webhook.pk}/").content.decode()


def test_a_test_to_an_inactive_webhook_is_refused_with_the_reason(tenant: Tenant, admin: Client) -> None:
    webhook, _ = webhooks.webhook_create(team=tenant.team, url="http://127.0.0.1:9/x", actor="t", active=False)
    response = admin.post(f"/webhooks/{webhook.pk}/test/", follow=True)
    assert "inactive" in response.content.decode()
    assert not WebhookDelivery.objects.exists()


def test_a_failed_deliverys_page_shows_its_error_and_offers_redelivery(tenant: Tenant, admin: Client) -> None:
    delivery, secret = failed_delivery(tenant, "http://127.0.0.1:9/mine")
    html = admin.get(f"/webhooks/deliveries/{delivery.pk}/").content.decode()
    assert "gave up after 5 attempts: HTTP 502: bad gateway" in html and "5 of " in html
    assert "&quot;kind&quot;: &quot;compaction_failed&quot;" in html and secret not in html
    assert f'action="/webhooks/deliveries/{delivery.pk}/redeliver/"' in html


# --- who may do what ------------------------------------------------------------------------------


def test_members_who_are_not_admins_read_but_change_nothing(tenant: Tenant, member: Client) -> None:
    delivery, _ = failed_delivery(tenant, "http://127.0.0.1:9/x")
    webhook = delivery.webhook
    assert member.get("/webhooks/new/").status_code == 403
    assert member.post("/webhooks/new/", form_data()).status_code == 403
    for action in ("edit", "active", "secret", "test", "delete"):
        assert member.post(f"/webhooks/{webhook.pk}/{action}/", form_data(active="0")).status_code == 403, action
    page = member.get(f"/webhooks/{webhook.pk}/")
    assert page.status_code == 200 and "<form" not in page.content.decode().split("<main", 1)[1]
    assert member.get(f"/webhooks/deliveries/{delivery.pk}/").status_code == 200
    after = Webhook.objects.get()
    assert (after.url, after.active, after.secret, Webhook.objects.count()) == (
        webhook.url,
        True,
        webhook.secret,
        1,
    )


def test_members_see_webhook_urls_masked_and_admins_see_them_whole(
    tenant: Tenant, member: Client, admin: Client
) -> None:
    delivery, _ = failed_delivery(tenant, "https://hooks.example.com/in?token=abc123")
    # A row stored before credentials in URLs were refused.
    Webhook.objects.filter(pk=delivery.webhook_id).update(url="https://bob:pw@hooks.example.com/in?token=abc123")
    pages = ["/webhooks/", f"/webhooks/{delivery.webhook_id}/", f"/webhooks/deliveries/{delivery.pk}/"]
    for page in pages:
        html = member.get(page).content.decode()
        assert "abc123" not in html and "bob:pw" not in html, page
        assert "https://[redacted]@hooks.example.com/in?token=[redacted]" in html, page
        assert "https://bob:pw@hooks.example.com/in?token=abc123" in admin.get(page).content.decode(), page


def test_another_teams_webhooks_and_deliveries_are_not_found(tenant: Tenant, admin: Client) -> None:
    theirs, _ = failed_delivery(make_tenant("dash-gamma"), "http://127.0.0.1:9/theirs")
    hook = theirs.webhook
    assert admin.get(f"/webhooks/{hook.pk}/").status_code == 404
    assert admin.get(f"/webhooks/deliveries/{theirs.pk}/").status_code == 404
    for action in ("edit", "active", "secret", "test", "delete"):
        assert admin.post(f"/webhooks/{hook.pk}/{action}/", form_data()).status_code == 404, action
    assert Webhook.objects.get().url == "http://127.0.0.1:9/theirs" and WebhookDelivery.objects.count() == 1
