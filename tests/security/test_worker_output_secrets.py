"""No configured secret reaches a page or an API answer through what a worker stored.

Workers keep what went wrong in their own words: a job's error and traceback, the raw LLM output of
a quarantined extraction, a webhook receiver's answer. Any of these can quote an outside answer
that echoed a secret (an LLM server's 401 body holding the key it was sent). They are masked when
stored, and again when shown, for rows stored before: every configured secret (the LLM and
embeddings keys, the passwords of the database, cache and broker URLs, SECRET_KEY, the API-key
HMAC secret, the metrics token) and the team's webhook signing secrets.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from memory_app.compaction import services as compaction
from memory_app.compaction.models import CompactionRun
from memory_app.conversations import services as conversations
from memory_app.events.models import MemoryEvent
from memory_app.facts import extraction as fact_extraction
from memory_app.facts.models import FactExtractionRun
from memory_app.jobs.dispatchers import Sent
from memory_app.search.models import IndexRun, SearchItem
from memory_app.tenancy.models import ApiKey, TeamMembership
from memory_app.webhooks import services as webhooks
from memory_app.webhooks.models import WebhookDelivery
from memsite.masking import REDACTED
from tests.conftest import Tenant, make_tenant
from tests.llm_server import Fail, Reply
from tests.memory_app.compaction.test_compaction import append, new_session, queued_run, turns
from tests.webhook_receiver import WebhookReceiver

LLM_KEY = "sk-LLMKEYcanary-echoed-7f3a9c21"
SETTING_SECRETS = {
    "LLM_API_KEY": LLM_KEY,
    "EMBEDDINGS_API_KEY": "emb-EMBKEYcanary-0c4d7e19",
    "SECRET_KEY": "DJSECRETcanary-" + "k8Zq2mN7vB4xL1pW9eR3tY6u" * 2,
    "API_KEY_HMAC_SECRET": "HMACcanary-5fG7hJ2kL9mN4pQ8rS1t",
    "METRICS_TOKEN": "METRICScanary-3e9b71c0",
}
DB_PASSWORD = "DBPWcanary-8e1f0c2d"
REDIS_PASSWORD = "REDISPWcanary-61a4b9"
BROKER_PASSWORD = "BROKERPWcanary-2c7e05"


@pytest.fixture
def secrets(settings, llm_server) -> dict[str, str]:
    """Every kind of configured secret, set as a deployment sets it: what each is called -> its value."""
    for name, value in SETTING_SECRETS.items():
        setattr(settings, name, value)  # after llm_server, which sets a key of its own
    settings.DATABASE_URL = f"postgres://memsite:{DB_PASSWORD}@db.internal:5432/memsite"
    settings.REDIS_URL = f"redis://:{REDIS_PASSWORD}@cache.internal:6379/0"
    settings.CELERY_BROKER_URL = f"amqp://worker:{BROKER_PASSWORD}@mq.internal:5672//"
    return {
        **SETTING_SECRETS,
        "database password": DB_PASSWORD,
        "redis password": REDIS_PASSWORD,
        "broker password": BROKER_PASSWORD,
    }


@pytest.fixture
def team(db: None, secrets: dict[str, str], job_outbox: list[Sent]) -> Tenant:
    """A team whose keys are made after the secrets are set (the HMAC secret signs them)."""
    return make_tenant(f"masked-{uuid.uuid4().hex[:6]}")


def team_admin(team: Tenant) -> Client:
    user = get_user_model().objects.create_user(f"admin-{uuid.uuid4().hex[:6]}")
    TeamMembership.objects.create(team=team.team, user=user, is_admin=True)
    client = Client()
    client.force_login(user)
    return client


def superuser() -> Client:
    client = Client()
    client.force_login(get_user_model().objects.create_superuser(f"root-{uuid.uuid4().hex[:6]}", "r@example.com"))
    return client


def admin_key(team: Tenant) -> APIClient:
    return make_tenant(team.team.name, role=ApiKey.Role.ADMIN).client


def shows_no_secret(response: Any, secrets: dict[str, str], where: str) -> str:
    assert response.status_code == 200, (where, response.status_code)
    text = response.content.decode()
    leaked = [name for name, value in secrets.items() if value in text]
    assert leaked == [], f"{where} shows {leaked}"
    return text


def ops_job_url(kind: str, job: Any) -> str:
    return reverse("dashboard:ops_job", args=[kind, job.pk])


# --- stored masked: the real failures ---------------------------------------------------------------


def test_an_llm_key_echoed_in_a_401_answer_is_masked_in_the_stored_traceback_the_ops_page_and_the_api(
    team: Tenant, secrets: dict[str, str], llm_server
) -> None:
    refusal = {"error": {"message": f"Incorrect API key provided: {LLM_KEY}", "code": "invalid_api_key"}}
    llm_server.script(Fail(401, body=json.dumps(refusal)))
    session_id = new_session(team.client)
    append(team.client, session_id, *turns(6))
    assert team.client.post(f"/api/v1/sessions/{session_id}/compact/").status_code == 202
    run = queued_run(session_id)

    assert compaction.compaction_execute(run_id=str(run.pk)) == "failed"

    run.refresh_from_db()
    assert "AuthenticationError" in run.traceback  # the traceback still says what went wrong
    assert LLM_KEY not in run.traceback and f"Incorrect API key provided: {REDACTED}" in run.traceback
    html = shows_no_secret(team_admin(team).get(ops_job_url("compaction", run)), secrets, "the ops job page")
    assert '<pre class="traceback">' in html and REDACTED in html
    for client in (team.client, admin_key(team)):
        shows_no_secret(client.get(f"/api/v1/sessions/{session_id}/compactions/"), secrets, "the runs API")


def test_an_llm_answer_quoting_the_key_is_kept_masked_as_the_quarantined_runs_raw_output(
    team: Tenant, secrets: dict[str, str], llm_server
) -> None:
    llm_server.script(Reply(f"I will not answer in JSON. Your key is {LLM_KEY}."))
    session_id = team.client.post("/api/v1/sessions/", {"memory_type": "kg"}, format="json").json()["id"]
    run = team.client.post(f"/api/v1/sessions/{session_id}/extract-facts/", {"text": "Ada wrote notes"}, format="json")
    assert run.status_code == 202, run.content

    assert fact_extraction.fact_extraction_execute(run_id=run.json()["id"]) == "quarantined"

    stored = FactExtractionRun.objects.get(pk=run.json()["id"])
    assert stored.raw_output == f"I will not answer in JSON. Your key is {REDACTED}."
    answer = shows_no_secret(team.client.get(f"/api/v1/fact-extractions/{stored.pk}/"), secrets, "the run API")
    assert json.loads(answer)["raw_output"] == stored.raw_output
    page = reverse("dashboard:fact_extraction", args=[stored.pk])
    assert REDACTED in shows_no_secret(team_admin(team).get(page), secrets, "the run page")


def test_a_webhook_receivers_answer_echoing_secrets_is_stored_masked(team: Tenant, secrets: dict[str, str]) -> None:
    receiver = WebhookReceiver([500]).start()
    try:
        webhook, signing_secret = webhooks.webhook_create(team=team.team, url=receiver.url, actor="test")
        receiver.body = json.dumps({"seen": [signing_secret, LLM_KEY, DB_PASSWORD]}).encode()
        delivery = webhooks.webhook_send_test(webhook=webhook, actor="test")
        with_webhook = {**secrets, "webhook secret": signing_secret}

        webhooks.webhook_deliver(delivery_id=str(delivery.pk))
    finally:
        receiver.stop()

    delivery.refresh_from_db()
    assert delivery.response_code == 500 and delivery.attempts == 1
    for stored in (delivery.error, delivery.response_body):
        assert [name for name, value in with_webhook.items() if value in stored] == []
        assert stored.count(REDACTED) == 3
    page = reverse("dashboard:webhook_delivery", args=[delivery.pk])
    shows_no_secret(team_admin(team).get(page), with_webhook, "the delivery page")


# --- shown masked: rows stored before masking, on every page, API answer and admin page -------------------


def leaky_jobs(team: Tenant, leak: str) -> dict[str, Any]:
    """A failed job of every kind, a failed job's event and a failed search item, whose stored text
    holds `leak` as rows written before masking have it."""
    managed = conversations.session_create(team=team.team, external_id="managed", memory_type="managed_conversation")
    kg = conversations.session_create(team=team.team, external_id="kg", memory_type="kg")
    webhook, _ = webhooks.webhook_create(team=team.team, url="http://127.0.0.1:9/hook?token=abc", actor="test")
    return {
        "compaction": CompactionRun.objects.create(
            team=team.team, session=managed, trigger="manual", status="failed", error=leak, traceback=leak
        ),
        "facts": FactExtractionRun.objects.create(
            team=team.team,
            session=kg,
            trigger="manual",
            status="quarantined",
            error=leak,
            traceback=leak,
            raw_output=leak,
        ),
        "search": IndexRun.objects.create(team=team.team, status="failed", error=leak, traceback=leak),
        "webhooks": WebhookDelivery.objects.create(
            team=team.team,
            webhook=webhook,
            kind="compaction_failed",
            payload={"data": {"error": leak}},
            status="failed",
            response_code=500,
            response_body=leak,
            error=leak,
            traceback=leak,
        ),
        "event": MemoryEvent.objects.create(
            team=team.team, session=managed, kind=MemoryEvent.Kind.COMPACTION_FAILED, data={"error": leak}
        ),
        "search item": SearchItem.objects.create(
            team=team.team, kind="message", source_key="m-1", text="hello", text_hash="h", state="failed", error=leak
        ),
    }


def test_rows_stored_before_masking_show_no_secret_on_any_page_api_answer_or_admin_page(
    team: Tenant, secrets: dict[str, str]
) -> None:
    webhook_secret = webhooks.webhook_create(team=team.team, url="http://127.0.0.1:9/other", actor="t")[1]
    everything = {**secrets, "webhook secret": webhook_secret}
    jobs = leaky_jobs(team, " | ".join(everything.values()))
    sessions = [jobs["compaction"].session_id, jobs["facts"].session_id]
    browser = team_admin(team)

    pages = [reverse("dashboard:ops"), reverse("dashboard:ops_status"), reverse("dashboard:ops_jobs")]
    pages += [ops_job_url(kind, jobs[kind]) for kind in ("compaction", "facts", "search", "webhooks")]
    pages += [reverse("dashboard:session", args=[session_id]) for session_id in sessions]
    pages += [reverse("dashboard:session_compaction_status", args=[jobs["compaction"].session_id])]
    pages += [reverse("dashboard:fact_extractions"), reverse("dashboard:fact_extraction", args=[jobs["facts"].pk])]
    pages += [reverse("dashboard:webhooks"), reverse("dashboard:webhook", args=[jobs["webhooks"].webhook_id])]
    pages += [reverse("dashboard:webhook_delivery", args=[jobs["webhooks"].pk])]
    for page in pages:
        assert REDACTED in shows_no_secret(browser.get(page), everything, page), page

    answers = [f"/api/v1/sessions/{jobs['compaction'].session_id}/compactions/", "/api/v1/fact-extractions/"]
    answers += [f"/api/v1/fact-extractions/{jobs['facts'].pk}/"]
    answers += [f"/api/v1/webhooks/{jobs['webhooks'].webhook_id}/deliveries/"]
    for client in (team.client, admin_key(team)):
        for answer in answers:
            assert REDACTED in shows_no_secret(client.get(answer), everything, answer), answer

    staff = superuser()
    admin_pages = [(CompactionRun, "compaction"), (FactExtractionRun, "facts"), (WebhookDelivery, "webhooks")]
    for model, kind in [*admin_pages, (MemoryEvent, "event")]:
        opts = model._meta
        change = reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[jobs[kind].pk])
        assert REDACTED in shows_no_secret(staff.get(change), everything, change), change
        shows_no_secret(staff.get(reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist")), everything, kind)
