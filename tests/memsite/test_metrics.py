"""GET /metrics in-process: who may read it, and what the request, queue and LLM metrics say.

Counters are summed over every process that ever wrote to the metrics folder, so these
tests compare a scrape before and after what they do.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from memory_app.compaction import services as compaction
from memory_app.compaction.models import CompactionRun
from memory_app.conversations import services
from memory_app.facts.models import FactExtractionRun
from tests.conftest import make_tenant
from tests.llm_server import Fail
from tests.memory_app.compaction.test_compaction import append, new_session, queued_run, summary_reply, turns
from tests.memsite.metrics_scrape import METRICS_TOKEN, Samples, label_values, parse, total

pytestmark = pytest.mark.django_db


@pytest.fixture
def metrics_token(settings) -> str:
    settings.METRICS_TOKEN = METRICS_TOKEN
    return METRICS_TOKEN


def scrape() -> Samples:
    response = Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {METRICS_TOKEN}")
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain")
    return parse(response.content.decode())


# --- who may read it ------------------------------------------------------------------------


def test_an_anonymous_scrape_is_401_without_metrics(metrics_token):
    response = Client().get("/metrics")
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert response.json()["error"] == "not_authenticated"
    assert b"memsite_" not in response.content


def test_a_wrong_token_is_403_without_metrics(metrics_token):
    response = Client().get("/metrics", HTTP_AUTHORIZATION="Bearer not-the-token")
    assert response.status_code == 403
    assert response.json()["error"] == "permission_denied"
    assert b"memsite_" not in response.content


def test_no_token_is_accepted_when_none_is_configured(settings):
    settings.METRICS_TOKEN = ""
    for header in ("Bearer ", "Bearer anything", "Bearer x"):
        response = Client().get("/metrics", HTTP_AUTHORIZATION=header)
        assert response.status_code in (401, 403), header
        assert b"memsite_" not in response.content


def test_a_team_api_key_is_not_a_metrics_token(metrics_token):
    tenant = make_tenant("metrics-key", role="admin")
    response = Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {tenant.key}")
    assert response.status_code == 403


def test_the_configured_token_reads_the_metrics(metrics_token):
    response = Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {METRICS_TOKEN}")
    assert response.status_code == 200
    assert b"# TYPE memsite_queue_jobs gauge" in response.content


def test_staff_sessions_read_the_metrics_and_other_users_do_not(settings):
    settings.METRICS_TOKEN = ""  # staff need no token
    staff, member = Client(), Client()
    staff.force_login(get_user_model().objects.create_user("ops", is_staff=True))
    member.force_login(get_user_model().objects.create_user("member"))
    assert staff.get("/metrics").status_code == 200
    denied = member.get("/metrics")
    assert denied.status_code == 403 and b"memsite_" not in denied.content


def test_metrics_only_answer_get(metrics_token):
    response = Client().post("/metrics", HTTP_AUTHORIZATION=f"Bearer {METRICS_TOKEN}")
    assert response.status_code == 405


# --- requests -------------------------------------------------------------------------------


def test_requests_are_counted_by_url_pattern_method_and_status_not_raw_path(metrics_token, api):
    pattern = "/api/v1/sessions/<uuid:session_id>/"
    before = scrape()
    ids = [uuid.uuid4() for _ in range(3)]
    for session_id in ids:
        assert api.get(f"/api/v1/sessions/{session_id}/").status_code == 404
    created = api.post("/api/v1/sessions/", {}, format="json")
    assert created.status_code == 201
    after = scrape()

    counted = total(after, "memsite_http_requests_total", endpoint=pattern, method="GET", status="404")
    assert counted - total(before, "memsite_http_requests_total", endpoint=pattern, method="GET", status="404") == 3
    list_pattern = "/api/v1/sessions/"
    created_after = total(after, "memsite_http_requests_total", endpoint=list_pattern, method="POST", status="201")
    assert created_after - total(before, "memsite_http_requests_total", endpoint=list_pattern, status="201") == 1
    latency = total(after, "memsite_http_request_duration_seconds_count", endpoint=pattern, method="GET")
    assert latency - total(before, "memsite_http_request_duration_seconds_count", endpoint=pattern, method="GET") == 3
    endpoints = label_values(after, "memsite_http_requests_total", "endpoint")
    assert not any(str(session_id) in endpoint for endpoint in endpoints for session_id in ids)


def test_paths_no_pattern_matches_share_one_label(metrics_token, client):
    before = scrape()
    for path in ("/no-such-page-1", "/no/such/page/2"):
        assert client.get(path).status_code == 404
    after = scrape()
    unmatched = total(after, "memsite_http_requests_total", endpoint="<unmatched>", status="404")
    assert unmatched - total(before, "memsite_http_requests_total", endpoint="<unmatched>", status="404") == 2
    assert not any("no-such-page" in e for e in label_values(after, "memsite_http_requests_total", "endpoint"))


# --- queues, read from the job rows ---------------------------------------------------------


def test_queue_depth_and_oldest_pending_age_come_from_the_job_rows(metrics_token, tenant):
    now = timezone.now()
    sessions = [services.session_create(team=tenant.team, system_prompt="") for _ in range(3)]
    waiting = CompactionRun.objects.create(team=tenant.team, session=sessions[0], trigger="manual")
    CompactionRun.objects.filter(pk=waiting.pk).update(queued_at=now - timedelta(seconds=300))
    CompactionRun.objects.create(team=tenant.team, session=sessions[1], trigger="manual", status="running")
    # A run waiting out a retry backoff is pending but not overdue.
    backoff = CompactionRun.objects.create(team=tenant.team, session=sessions[2], trigger="manual")
    CompactionRun.objects.filter(pk=backoff.pk).update(queued_at=now + timedelta(seconds=60))
    CompactionRun.objects.create(team=tenant.team, session=sessions[2], trigger="manual", status="done")
    FactExtractionRun.objects.create(team=tenant.team, trigger="text", input_text="x", status="failed")

    samples = scrape()
    assert total(samples, "memsite_queue_jobs", queue="compaction", state="pending") == 2
    assert total(samples, "memsite_queue_jobs", queue="compaction", state="running") == 1
    assert total(samples, "memsite_queue_jobs", queue="facts", state="pending") == 0
    assert total(samples, "memsite_queue_oldest_pending_age_seconds", queue="compaction") >= 300
    assert total(samples, "memsite_queue_oldest_pending_age_seconds", queue="facts") == 0

    FactExtractionRun.objects.create(
        team=tenant.team, trigger="text", input_text="x", queued_at=now - timedelta(seconds=42)
    )
    samples = scrape()
    assert total(samples, "memsite_queue_jobs", queue="facts", state="pending") == 1
    assert total(samples, "memsite_queue_oldest_pending_age_seconds", queue="facts") >= 42


def test_the_search_queue_and_index_backlog_come_from_their_rows(metrics_token, tenant):
    from memory_app.search.models import IndexRun, SearchItem

    IndexRun.objects.create(team=tenant.team, queued_at=timezone.now() - timedelta(seconds=120))
    for state in ("pending", "pending", "failed", "indexed"):
        SearchItem.objects.create(
            team=tenant.team,
            kind="fact",
            source_key=state + str(SearchItem.objects.count()),
            text="x",
            text_hash="h",
            state=state,
        )

    samples = scrape()
    assert total(samples, "memsite_queue_jobs", queue="search", state="pending") == 1
    assert total(samples, "memsite_queue_oldest_pending_age_seconds", queue="search") >= 120
    assert total(samples, "memsite_search_index_backlog", state="pending") == 2
    assert total(samples, "memsite_search_index_backlog", state="failed") == 1


def test_the_queue_gauges_cost_one_query_per_queue(metrics_token, django_assert_num_queries):
    client = Client()
    # compaction, facts, search; the search index's backlog
    with django_assert_num_queries(4):
        assert client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {METRICS_TOKEN}").status_code == 200


# --- LLM calls ------------------------------------------------------------------------------


def test_llm_tokens_and_errors_are_counted_by_purpose_at_the_llm_boundary(metrics_token, api, llm_server, sent_tasks):
    labels = {"purpose": "summarize", "backend": "openai"}
    before = scrape()
    session_id = new_session(api)
    append(api, session_id, *turns(6))
    run = queued_run(session_id)
    llm_server.script(Fail(500), summary_reply())  # summary_reply reports 500 prompt / 60 completion tokens

    assert compaction.compaction_execute(run_id=str(run.pk)).startswith("retry-in-")
    assert compaction.compaction_execute(run_id=str(run.pk)) == "done"
    after = scrape()

    def delta(name: str, **extra: str) -> float:
        return total(after, name, **labels, **extra) - total(before, name, **labels, **extra)

    assert delta("memsite_llm_tokens_total", type="prompt") == 500
    assert delta("memsite_llm_tokens_total", type="completion") == 60
    assert delta("memsite_llm_calls_total", outcome="ok") == 1
    assert delta("memsite_llm_calls_total", outcome="error") == 1
    assert delta("memsite_llm_errors_total", kind="transient") == 1
    assert delta("memsite_llm_call_duration_seconds_count") == 2
