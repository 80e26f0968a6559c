"""The sessions list: agents, token totals, message counts and a failed-compaction badge per
session, filtered, sorted and paged on the server in a fixed number of queries."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from memory_app.compaction.models import CompactionRun
from memory_app.conversations import pages as views
from memory_app.conversations import services
from memory_app.conversations.models import MemoryType, Session
from memory_app.tenancy.models import TeamMembership
from tests.conftest import Tenant
from tests.memory_app.conversations.long_session_data import failed_compaction


@pytest.fixture
def member(client: Client, tenant: Tenant) -> Client:
    user = get_user_model().objects.create_user("ada", password="correct horse battery")
    TeamMembership.objects.create(team=tenant.team, user=user)
    client.force_login(user)
    return client


def session_with(tenant: Tenant, external_id: str, *messages: dict, **fields) -> Session:
    session = services.session_create(team=tenant.team, external_id=external_id, **fields)
    if messages:
        services.message_append(session=session, messages=list(messages))
    session.refresh_from_db()
    return session


def listed(response) -> dict[str, tuple[Session, list[tuple[str, str]]]]:
    return {session.external_id: (session, agents) for session, agents in response.context["rows"]}


def test_it_shows_each_sessions_agents_with_links_to_their_pages(member: Client, tenant: Tenant) -> None:
    session_with(
        tenant,
        "crew",
        {"role": "user", "content": "go", "send_from": "lead"},
        {"role": "assistant", "content": "on it", "name": "coder"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c", "type": "function", "function": {"name": "ls", "arguments": "{}"}}],
        },
        # A tool result's name is the tool's, not an agent's.
        {"role": "tool", "tool_call_id": "c", "name": "ls", "content": "a b"},
        metadata={"agent_name": "planner"},
    )
    session_with(tenant, "silent")

    response = member.get(reverse("dashboard:sessions"))

    rows = listed(response)
    assert [name for name, _url in rows["crew"][1]] == ["planner", "coder", "lead"]
    assert rows["silent"][1] == []
    html = response.content.decode()
    assert f'href="{reverse("dashboard:agent", args=["coder"])}"' in html


def test_it_shows_token_totals_with_what_they_count(member: Client, tenant: Tenant) -> None:
    session = session_with(
        tenant,
        "managed",
        {"role": "user", "content": "hello there"},
        system_prompt="Be brief.",
        memory_type=MemoryType.MANAGED_CONVERSATION,
    )

    response = member.get(reverse("dashboard:sessions"))

    row, _agents = listed(response)["managed"]
    assert row.raw_tokens == session.history_tokens + session.system_prompt_tokens > 0
    html = response.content.decode()
    assert f'title="{row.raw_tokens} tokens of raw history: every stored message' in html
    assert f'title="{session.active_tokens} tokens in the active context' in html
    assert 'title="1 stored message">1</span>' in html


def test_it_badges_sessions_whose_latest_compaction_failed(member: Client, tenant: Tenant) -> None:
    broken = session_with(tenant, "broken")
    failed_compaction(broken)
    recovered = session_with(tenant, "recovered")
    failed_compaction(recovered)
    CompactionRun.objects.create(team=tenant.team, session=recovered, status="done", trigger="manual")
    session_with(tenant, "never")

    everything = member.get(reverse("dashboard:sessions"))
    only_failed = member.get(reverse("dashboard:sessions"), {"compaction_failed": "on"})

    rows = listed(everything)
    assert rows["broken"][0].latest_compaction_status == "failed"
    assert rows["recovered"][0].latest_compaction_status == "done"
    assert rows["never"][0].latest_compaction_status is None
    assert everything.content.decode().count(">compaction failed</span>") == 1
    assert list(listed(only_failed)) == ["broken"]


def test_it_filters_by_agent(member: Client, tenant: Tenant) -> None:
    session_with(tenant, "by-message", {"role": "assistant", "content": "x", "name": "coder"})
    session_with(tenant, "by-metadata", metadata={"agent_name": "coder"})
    session_with(tenant, "other", {"role": "assistant", "content": "x", "name": "reviewer"})
    session_with(tenant, "tool-named", {"role": "user", "content": "x", "name": "coder-bot"})

    response = member.get(reverse("dashboard:sessions"), {"agent": "coder"})

    assert sorted(listed(response)) == ["by-message", "by-metadata"]


@pytest.mark.parametrize(
    ("order", "expected"),
    [
        ("messages", ["three", "one", "none"]),
        ("tokens", ["three", "one", "none"]),
        ("created", ["none", "one", "three"]),
    ],
)
def test_it_sorts_on_the_server(member: Client, tenant: Tenant, order: str, expected: list[str]) -> None:
    session_with(tenant, "three", *({"role": "user", "content": f"message number {n}"} for n in range(3)))
    session_with(tenant, "one", {"role": "user", "content": "one"})
    session_with(tenant, "none")

    response = member.get(reverse("dashboard:sessions"), {"order": order})

    assert [session.external_id for session, _agents in response.context["rows"]] == expected


def test_pages_keep_the_new_filters(member: Client, tenant: Tenant) -> None:
    for index in range(views.SESSIONS_PER_PAGE + 2):
        session_with(tenant, f"s{index:02d}", metadata={"agent_name": "coder"})

    first = member.get(reverse("dashboard:sessions"), {"agent": "coder", "order": "tokens"})

    assert len(first.context["rows"]) == views.SESSIONS_PER_PAGE
    assert "?agent=coder&amp;order=tokens&amp;page=2" in first.content.decode()


def test_the_list_takes_the_same_queries_however_many_sessions_and_agents(
    member: Client, tenant: Tenant, django_assert_max_num_queries
) -> None:
    for index in range(12):
        session = session_with(
            tenant,
            f"s{index}",
            {"role": "user", "content": "hi", "send_from": f"agent-{index}"},
            {"role": "assistant", "content": "yo", "name": f"helper-{index}"},
        )
        failed_compaction(session)

    # session + user, teams, count, page (agents' figures, tokens, latest compaction), agents
    with django_assert_max_num_queries(6):
        response = member.get(reverse("dashboard:sessions"), {"order": "messages", "compaction_failed": "on"})
    assert len(response.context["rows"]) == 12
