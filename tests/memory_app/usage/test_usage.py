"""Token economics and cost control: the LLM-call and context ledgers, the usage
API, the per-team daily token budget and the per-key rate limit of LLM-backed endpoints.

LLM numbers come from the scripted OpenAI-compatible server's `usage` fields over real HTTP.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from memory_app.compaction import services as compaction
from memory_app.compaction.models import CompactionRun
from memory_app.conversations import services
from memory_app.conversations.models import MemoryType
from memory_app.facts import extraction as fact_extraction
from memory_app.facts.models import FactExtractionRun
from memory_app.models import LLMCall
from tests.conftest import make_tenant
from tests.experiences_app.conftest import add_experience
from tests.llm_server import Fail, Reply

pytestmark = pytest.mark.django_db

SUMMARY = json.dumps(
    {
        "user_request_summary": "plan a trip",
        "summary": "Oslo then Bergen.",
        "salient_facts": [],
        "open_threads": [],
        "keep_images": [],
    }
)
FACTS = json.dumps([{"subject": "Ada", "predicate": "lives in", "object": "Oslo"}])


def managed_session(tenant, turns: int = 6):
    session = services.session_create(
        team=tenant.team,
        system_prompt="You plan trips.",
        memory_type=MemoryType.MANAGED_CONVERSATION,
        metadata={"agent_name": "planner"},
    )
    for turn in range(turns):
        services.message_append(
            session=session,
            messages=[
                {"role": "user", "content": f"Question {turn}: what should we see in Oslo on day {turn}? " * 5},
                {"role": "assistant", "content": f"Answer {turn}: the opera, the fjord and the museums. " * 8},
            ],
        )
    return session


def run_compaction(session) -> str:
    run, _ = compaction.compaction_request(session=session, trigger=CompactionRun.Trigger.MANUAL)
    return compaction.compaction_execute(run_id=str(run.pk))


def run_extraction(session) -> FactExtractionRun:
    run = fact_extraction.fact_extraction_request_text(session=session, text="Ada lives in Oslo.", role="user")
    fact_extraction.fact_extraction_execute(run_id=str(run.pk))
    run.refresh_from_db()
    return run


def usage(api, **params):
    response = api.get("/api/v1/usage/", params)
    assert response.status_code == 200, response.content
    return response.json()


# --- the LLM-call ledger --------------------------------------------------------------------------


def test_every_llm_call_is_recorded_with_the_servers_usage_figures(api, tenant, llm_server, job_outbox) -> None:
    session = managed_session(tenant)
    add_experience(tenant.team, "oslo-tips", when="Use when the user asks about Oslo.", what="Mention the opera.")
    llm_server.script(
        Reply(SUMMARY, prompt_tokens=1200, completion_tokens=90),
        Reply(FACTS, prompt_tokens=300, completion_tokens=25),
        Reply('{"oslo-tips": true}', prompt_tokens=140, completion_tokens=6),
    )

    assert run_compaction(session) == "done"
    assert run_extraction(session).status == FactExtractionRun.Status.DONE
    response = api.post("/api/v1/experiences/select/", {"role": "planner", "query": "Oslo?"}, format="json")
    assert response.status_code == 200, response.content

    calls = {c.purpose: c for c in LLMCall.objects.filter(team=tenant.team)}
    assert {p: (c.prompt_tokens, c.completion_tokens, c.outcome) for p, c in calls.items()} == {
        "summarize": (1200, 90, "ok"),
        "extract_facts": (300, 25, "ok"),
        "select_experiences": (140, 6, "ok"),
    }
    sessions = {purpose: call.session_id for purpose, call in calls.items()}
    assert sessions == {"summarize": session.pk, "extract_facts": session.pk, "select_experiences": None}
    assert {c.backend for c in calls.values()} == {"openai"}
    assert (calls["summarize"].agent, calls["select_experiences"].agent) == ("planner", "planner")
    assert calls["summarize"].model == "scripted-model"

    by_purpose = {g["key"]: g["figures"] for g in usage(api, group_by="purpose")["groups"]}
    assert by_purpose["summarize"]["spent_tokens"] == 1290
    assert by_purpose["extract_facts"]["spent_tokens"] == 325
    assert by_purpose["select_experiences"]["spent_tokens"] == 146
    totals = usage(api, group_by="purpose")["totals"]
    assert (totals["llm_calls"], totals["prompt_tokens"], totals["completion_tokens"]) == (3, 1640, 121)


def test_failed_calls_are_recorded_with_their_outcome_and_no_tokens(tenant, llm_server, sent_tasks) -> None:
    session = managed_session(tenant)
    llm_server.script(Fail(500), Fail(400))

    assert run_compaction(session).startswith("retry-in-")
    run_id = str(CompactionRun.objects.get().pk)
    assert compaction.compaction_execute(run_id=run_id) == "failed"

    outcomes = list(LLMCall.objects.order_by("created_at").values_list("outcome", "prompt_tokens", "error"))
    assert [o[:2] for o in outcomes] == [("transient_error", 0), ("permanent_error", 0)]
    assert "500" in outcomes[0][2] and "400" in outcomes[1][2]


def test_the_offline_backend_is_recorded_as_not_billable(tenant, settings, sent_tasks) -> None:
    settings.LLM_BASE_URL = ""
    session = managed_session(tenant)
    assert run_compaction(session) == "done"
    call = LLMCall.objects.get()
    assert (call.backend, call.billable, call.outcome) == ("extractive", False, "ok")


# --- contexts served ----------------------------------------------------------------------------


def test_a_served_context_records_the_raw_history_it_stands_for(api, tenant, session_id) -> None:
    for turn in range(15):
        api.post(
            f"/api/v1/sessions/{session_id}/messages/",
            {"role": "user" if turn % 2 == 0 else "assistant", "content": f"message number {turn} " * 10},
            format="json",
        )
    history = services.Session.objects.get(pk=session_id)
    stored = sum(history.messages.values_list("token_count", flat=True))
    assert history.history_tokens == stored

    context = api.get(f"/api/v1/sessions/{session_id}/context/", {"last": 4, "agent": "writer"}).json()

    figures = {g["key"]: g["figures"] for g in usage(api, group_by="session")["groups"]}[session_id]
    assert figures["contexts_served"] == 1
    assert figures["raw_tokens"] == history.system_prompt_tokens + stored
    assert figures["served_tokens"] == context["token_count"]
    assert figures["saved_tokens"] == figures["raw_tokens"] - context["token_count"] > 0
    by_agent = {g["key"]: g["figures"] for g in usage(api, group_by="agent")["groups"]}
    assert by_agent["writer"]["contexts_served"] == 1


def test_a_plain_window_is_named_as_the_window_and_saves_nothing_by_compaction(api, session_id) -> None:
    for turn in range(30):
        api.post(
            f"/api/v1/sessions/{session_id}/messages/",
            {"role": "user" if turn % 2 == 0 else "assistant", "content": f"message number {turn} " * 10},
            format="json",
        )
    history = services.Session.objects.get(pk=session_id)
    served = api.get(f"/api/v1/sessions/{session_id}/context/").json()
    window = sum(history.messages.order_by("-seq")[: len(served["messages"]) - 1].values_list("token_count", flat=True))

    totals = usage(api)["totals"]
    assert totals["compaction_saved_tokens"] == 0
    assert totals["window_kept_out_tokens"] == history.history_tokens - window > 0
    # The saving keeps its meaning: what the window kept out, less the reply priming it costs.
    assert totals["saved_tokens"] == totals["raw_tokens"] - served["token_count"]
    assert totals["saved_tokens"] == totals["window_kept_out_tokens"] + totals["compaction_saved_tokens"] - (
        served["token_count"] - history.system_prompt_tokens - window
    )


def test_a_compacted_context_names_what_compaction_saved_apart_from_the_window(api, tenant, llm_server) -> None:
    session = managed_session(tenant, turns=8)
    llm_server.script(Reply(SUMMARY))
    assert run_compaction(session) == "done"
    session.refresh_from_db()

    whole = api.get(f"/api/v1/sessions/{session.pk}/context/").json()
    totals = usage(api)["totals"]
    summarized = totals["raw_tokens"] - session.active_tokens
    assert summarized > 0
    assert (totals["compaction_saved_tokens"], totals["window_kept_out_tokens"]) == (summarized, 0)

    api.get(f"/api/v1/sessions/{session.pk}/context/", {"last": 2})
    shorter = usage(api)["totals"]
    assert shorter["compaction_saved_tokens"] == 2 * summarized
    assert shorter["window_kept_out_tokens"] > 0
    assert shorter["saved_tokens"] - totals["saved_tokens"] > totals["saved_tokens"]
    per_session = {g["key"]: g["figures"] for g in usage(api, group_by="session")["groups"]}[str(session.pk)]
    assert per_session["window_kept_out_tokens"] == shorter["window_kept_out_tokens"]
    assert whole["token_count"] > 0


def test_history_tokens_follow_edits_deletes_and_resets(api, session_id) -> None:
    ids = [
        api.post(f"/api/v1/sessions/{session_id}/messages/", {"role": "user", "content": text}, format="json").json()[
            "message_id"
        ]
        for text in ("short", "a somewhat longer message than the first one")
    ]
    session = services.Session.objects.get(pk=session_id)

    def total() -> int:
        return sum(session.messages.values_list("token_count", flat=True))

    api.patch(f"/api/v1/sessions/{session_id}/messages/{ids[0]}/", {"content": "now much longer " * 20}, format="json")
    session.refresh_from_db()
    assert session.history_tokens == total()
    api.delete(f"/api/v1/sessions/{session_id}/messages/{ids[1]}/")
    session.refresh_from_db()
    assert session.history_tokens == total()
    api.post(f"/api/v1/sessions/{session_id}/reset/")
    session.refresh_from_db()
    assert session.history_tokens == 0


# --- the usage API ---------------------------------------------------------------------------------


def test_usage_is_scoped_to_the_callers_team_and_range(api, tenant, other_tenant) -> None:
    LLMCall.objects.create(team=other_tenant.team, purpose="summarize", backend="openai", outcome="ok", prompt_tokens=9)
    old = LLMCall.objects.create(team=tenant.team, purpose="summarize", backend="openai", outcome="ok", prompt_tokens=5)
    LLMCall.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=40))
    LLMCall.objects.create(team=tenant.team, purpose="summarize", backend="openai", outcome="ok", prompt_tokens=7)

    assert usage(api, group_by="purpose")["totals"]["prompt_tokens"] == 7  # default: the last 30 days
    since = (timezone.now() - timedelta(days=60)).date().isoformat()
    assert usage(api, group_by="purpose", **{"from": since})["totals"]["prompt_tokens"] == 12


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"group_by": "model"}, "group_by"),
        ({"from": "yesterday"}, "from"),
        ({"from": "2026-11-02", "to": "2026-11-01"}, "to"),
        ({"session": "not-a-uuid"}, "session"),
    ],
)
def test_bad_usage_queries_name_the_field(api, params, field) -> None:
    response = api.get("/api/v1/usage/", params)
    assert response.status_code == 400
    assert field in response.json()["fields"]


def test_another_teams_session_is_not_found_in_usage(api, other_tenant) -> None:
    foreign = services.session_create(team=other_tenant.team)
    assert api.get("/api/v1/usage/", {"session": str(foreign.pk)}).status_code == 404


# --- the daily token budget (cost control) --------------------------------------------------------


def spend(team, tokens: int) -> None:
    LLMCall.objects.create(team=team, purpose="summarize", backend="openai", outcome="ok", prompt_tokens=tokens)


def test_a_job_over_the_budget_ends_budget_exceeded_without_calling_the_llm(tenant, llm_server, sent_tasks) -> None:
    tenant.team.daily_llm_token_budget = 1000
    tenant.team.save()
    spend(tenant.team, 1000)
    session = managed_session(tenant)

    assert run_compaction(session) == "budget_exceeded"

    run = CompactionRun.objects.get()
    assert run.status == CompactionRun.Status.BUDGET_EXCEEDED
    assert "daily LLM token budget" in run.error
    assert llm_server.requests == []
    assert LLMCall.objects.filter(outcome="budget_exceeded").count() == 1
    assert session.messages.count() == 12  # raw history untouched


def test_fact_extraction_over_the_budget_ends_budget_exceeded(tenant, llm_server, settings, job_outbox) -> None:
    settings.DAILY_LLM_TOKEN_BUDGET = 50
    spend(tenant.team, 60)
    session = services.session_create(team=tenant.team)

    assert run_extraction(session).status == FactExtractionRun.Status.BUDGET_EXCEEDED
    assert llm_server.requests == []


def test_yesterdays_spend_does_not_count_and_a_budget_under_the_spend_allows_calls(
    tenant, llm_server, sent_tasks
) -> None:
    tenant.team.daily_llm_token_budget = 1000
    tenant.team.save()
    spend(tenant.team, 5000)
    LLMCall.objects.update(created_at=timezone.now() - timedelta(days=1, minutes=1))
    spend(tenant.team, 999)
    llm_server.script(Reply(SUMMARY))

    assert run_compaction(managed_session(tenant)) == "done"
    assert len(llm_server.requests) == 1


def test_the_offline_backend_is_never_refused_by_the_budget(tenant, settings, sent_tasks) -> None:
    settings.LLM_BASE_URL = ""
    settings.DAILY_LLM_TOKEN_BUDGET = 10
    spend(tenant.team, 10)
    assert run_compaction(managed_session(tenant)) == "done"


def test_a_selection_over_the_budget_is_429_with_retry_after(api, tenant, llm_server) -> None:
    add_experience(tenant.team, "oslo-tips", when="Use when the user asks about Oslo.", what="Mention the opera.")
    tenant.team.daily_llm_token_budget = 100
    tenant.team.save()
    spend(tenant.team, 150)

    response = api.post("/api/v1/experiences/select/", {"role": "planner", "query": "Oslo?"}, format="json")

    assert response.status_code == 429
    assert response.json()["error"] == "budget_exceeded"
    assert 0 < int(response["Retry-After"]) <= 86400
    assert llm_server.requests == []
    budget = usage(api)["budget"]
    assert (budget["daily_budget"], budget["spent_today"], budget["remaining"]) == (100, 150, 0)


# --- the per-key rate limit (cost control) ---------------------------------------------------------


def compactable_session(client) -> str:
    """A managed session with a turn before the protected one (a compaction has work to do)."""
    session = client.post("/api/v1/sessions/", {"memory_type": "managed_conversation"}, format="json").json()["id"]
    turn = [
        {"role": "user", "content": "I live in Oslo."},
        {"role": "assistant", "content": "Noted."},
        {"role": "user", "content": "And I like tea."},
        {"role": "assistant", "content": "Noted too."},
    ]
    client.post(f"/api/v1/sessions/{session}/messages/", {"messages": turn}, format="json")
    return session


def test_llm_backed_endpoints_are_rate_limited_per_key(api, tenant, settings) -> None:
    settings.LLM_RATE_LIMIT = "2/minute"
    other_key = make_tenant("gamma").client
    other_session = compactable_session(other_key)
    session_id = compactable_session(api)
    compact = f"/api/v1/sessions/{session_id}/compact/"

    assert [api.post(compact).status_code for _ in range(2)] == [202, 202]
    refused = api.post(compact)
    assert refused.status_code == 429
    assert refused.json()["error"] == "throttled"
    assert 0 < int(refused["Retry-After"]) <= 60
    assert api.post("/api/v1/experiences/select/", {"role": "a", "query": "b"}, format="json").status_code == 429
    # Other keys, and endpoints that cause no LLM work, are not affected.
    assert other_key.post(f"/api/v1/sessions/{other_session}/compact/").status_code == 202
    assert api.get(f"/api/v1/sessions/{session_id}/context/").status_code == 200


def test_llm_backed_endpoints_answer_while_the_rate_limit_cache_is_unreachable(api, settings) -> None:
    # The throttle's cache is the broker's Redis in production: a Redis outage must not turn
    # these writes into 500s (the team's budget, in the database, still bounds the spending).
    settings.CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": "redis://127.0.0.1:9/0"}
    }
    settings.LLM_BASE_URL, settings.LLM_BACKEND = "", ""
    session_id = compactable_session(api)

    assert api.post(f"/api/v1/sessions/{session_id}/compact/").status_code == 202
    assert api.post(f"/api/v1/sessions/{session_id}/extract-facts/", {}, format="json").status_code == 202
    selected = api.post("/api/v1/experiences/select/", {"role": "a", "query": "b"}, format="json")
    assert selected.status_code == 200, selected.content
