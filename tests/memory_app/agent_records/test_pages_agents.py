"""The agents pages: every agent name of the team, and everything one agent did across sessions."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from experiences_app.models import SelectionLog
from memory_app.agent_records import pages as agent_pages
from memory_app.conversations import services
from memory_app.dashboard import links
from memory_app.tenancy.models import TeamMembership
from tests.conftest import Tenant, make_tenant
from tests.memory_app.agent_records.agents_data import (
    DEVELOPER_REPLY,
    PICKED,
    RAW_TOKENS,
    SELECTION_QUERY,
    SERVED_TOKENS,
    SPENT_COMPLETION,
    SPENT_PROMPT,
    TOOL_OUTPUT,
    AgentsWorld,
    build_agents_world,
)

pytestmark = pytest.mark.django_db

AGENTS = reverse("dashboard:agents")


@pytest.fixture
def member(client: Client, tenant: Tenant) -> Client:
    user = get_user_model().objects.create_user("ada", password="correct horse battery")
    TeamMembership.objects.create(team=tenant.team, user=user)
    client.force_login(user)
    return client


@pytest.fixture
def world(tenant: Tenant) -> AgentsWorld:
    return build_agents_world(tenant.team)


def agent_url(name: str, query: str = "") -> str:
    return reverse("dashboard:agent", args=[name]) + query


def text_of(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def listed(html: str) -> list[str]:
    """The agent names of the list's rows, in order."""
    return re.findall(r'class="role-tag agent-name"[^>]*>([^<]+)<', html)


def row_of(html: str, name: str) -> str:
    """The text of the agent's row: name, key badge, then the figures."""
    rows = [row for row in html.split("<tr>") if f">{name}</" in row.split("</th>")[0]]
    assert len(rows) == 1, f"no single row for {name}"
    return text_of(rows[0].split("</tr>")[0])


# --- the list -----------------------------------------------------------------------------------


def test_it_lists_every_name_the_teams_data_gives_an_agent(member: Client, world: AgentsWorld) -> None:
    html = member.get(AGENTS).content.decode()
    assert sorted(listed(html)) == sorted(
        ["CodeInterpreter", "Planner", "User", "developer", "reviewer", "deployer"]
    ), "messages (sender, name), records, keys and selections name agents; a tool result's name does not"


def test_each_agent_shows_its_sessions_messages_tokens_records_and_selections(
    member: Client, world: AgentsWorld
) -> None:
    html = member.get(AGENTS).content.decode()
    developer = row_of(html, "developer")
    # sessions: sales-analysis (record) and auth-refactor (messages, metadata, selection)
    # messages: the tool call and the reply; record entries: the main document plus the failed attempt
    tokens = sum(m.token_count for m in world.auth_session.messages.filter(name="developer").exclude(role="tool"))
    records = world.rounds_session.agent_memories.get(agent="developer").entries.count()
    assert developer.split()[:7] == ["developer", "1", "key", "2", "2", str(tokens), str(records)]
    assert developer.split()[7] == "1"  # one selection
    assert "1 key" in developer
    assert row_of(html, "deployer").split()[:7] == ["deployer", "1", "key", "0", "0", "0", "0"]
    assert "never" in row_of(html, "deployer")


def test_every_number_says_what_it_counts_on_hover(member: Client, world: AgentsWorld) -> None:
    html = member.get(AGENTS).content.decode()
    assert 'title="2 sessions with this agent"' in html
    assert "tokens in the messages this agent sent" in html
    assert re.search(r'<th scope="col" class="num" title="Tokens of the messages the agent sent[^"]*">', html)


def test_names_link_to_their_agent_page(member: Client, world: AgentsWorld) -> None:
    html = member.get(AGENTS).content.decode()
    assert f'href="{agent_url("developer")}"' in html
    assert f'href="{agent_url("CodeInterpreter")}"' in html


def test_the_list_filters_by_name_and_sorts_on_the_server(member: Client, world: AgentsWorld) -> None:
    assert listed(member.get(AGENTS + "?q=DEV").content.decode()) == ["developer"]
    by_name = listed(member.get(AGENTS + "?order=name").content.decode())
    assert by_name == sorted(by_name)
    by_messages = listed(member.get(AGENTS + "?order=messages").content.decode())
    assert by_messages[0] == "Planner"  # five posts, more than anyone
    assert by_messages[-1] in ("deployer", "reviewer")


def test_a_bad_sort_falls_back_to_last_seen(member: Client, world: AgentsWorld) -> None:
    response = member.get(AGENTS + "?order=evil")
    assert response.status_code == 200
    assert listed(response.content.decode())[-1] == "deployer"  # never seen goes last


def test_the_list_pages(member: Client, world: AgentsWorld, monkeypatch) -> None:
    monkeypatch.setattr(agent_pages, "AGENTS_PER_PAGE", 4)
    first = listed(member.get(AGENTS + "?order=name").content.decode())
    second_html = member.get(AGENTS + "?order=name&page=2").content.decode()
    second = listed(second_html)
    assert len(first) == 4 and len(second) == 2
    assert not set(first) & set(second)
    assert "Page 2 of 2" in second_html


def test_another_teams_agents_are_never_listed_nor_counted(member: Client, world: AgentsWorld) -> None:
    beta = make_tenant("beta").team
    secret = services.session_create(team=beta, external_id="beta-secret")
    services.message_append(session=secret, messages=[{"role": "assistant", "name": "intruder", "content": "hi"}])
    services.message_append(session=secret, messages=[{"role": "assistant", "name": "developer", "content": "hi"}])
    html = member.get(AGENTS).content.decode()
    assert "intruder" not in listed(html)
    assert row_of(html, "developer").split()[3:5] == ["2", "2"]  # still its own team's two sessions, two messages


def test_the_list_takes_a_fixed_number_of_queries(
    member: Client, world: AgentsWorld, tenant: Tenant, django_assert_num_queries
) -> None:
    # auth session + user, teams, then selections, messages, named sessions, records, keys
    with django_assert_num_queries(8):
        member.get(AGENTS)
    more = services.session_create(team=tenant.team, external_id="more")
    services.message_append(
        session=more, messages=[{"role": "assistant", "name": f"helper-{i}", "content": "x"} for i in range(30)]
    )
    with django_assert_num_queries(8):
        member.get(AGENTS)


def test_the_nav_offers_the_agents_page(member: Client, world: AgentsWorld) -> None:
    html = member.get(AGENTS).content.decode()
    assert f'<a href="{AGENTS}" aria-current="page">Agents</a>' in html
    record = member.get(reverse("dashboard:agent_memory", args=[world.rounds_session.pk, "developer"]))
    assert f'<a href="{AGENTS}">Agents</a>' in record.content.decode()


# --- one agent ----------------------------------------------------------------------------------


def test_the_agent_page_shows_what_the_agent_did_across_sessions(member: Client, world: AgentsWorld) -> None:
    response = member.get(agent_url("developer"))
    assert response.status_code == 200
    html = response.content.decode()
    text = text_of(html)
    # sessions: both, each linked
    assert f'href="{reverse("dashboard:session", args=[world.auth_session.pk])}"' in html
    assert f'href="{reverse("dashboard:session", args=[world.rounds_session.pk])}"' in html
    assert "session agent" in text  # auth-refactor's metadata names it
    # messages, newest first, linked to their place in the session; the tool's output is not its
    assert DEVELOPER_REPLY in text
    assert "calls run_tests" in text
    assert TOOL_OUTPUT not in text
    reply_seq = world.auth_session.messages.order_by("seq").last().seq  # the reply comes last
    assert f"?after={reply_seq - 1}#m{reply_seq}" in html
    assert text.index(DEVELOPER_REPLY) < text.index("calls run_tests")
    # work records, linked to the per-session record page and its entries
    memory_page = reverse("dashboard:agent_memory", args=[world.rounds_session.pk, "developer"])
    assert f'href="{memory_page}"' in html
    assert f'href="{memory_page}#attempt-003"' in html  # the failed attempt, the latest entry
    assert "(1 failed)" in text
    # selections, with what they picked
    assert SELECTION_QUERY in text
    assert f'href="{reverse("experiences:detail", args=[PICKED])}"' in html
    selection = SelectionLog.objects.get(team=world.team)
    assert f'href="{reverse("experiences:selection", args=[selection.pk])}"' in html
    # facts of its sessions
    assert "login hashes with bcrypt" in text
    # tokens from the usage ledger
    assert f"{SERVED_TOKENS} tokens in 1 context, standing for {RAW_TOKENS} raw" in text
    assert f"{RAW_TOKENS - SERVED_TOKENS} tokens" in text
    assert f"{SPENT_PROMPT + SPENT_COMPLETION} tokens in 1 LLM call" in text


def test_an_agent_with_only_an_api_key_has_an_empty_page(member: Client, world: AgentsWorld) -> None:
    text = text_of(member.get(agent_url("deployer")).content.decode())
    assert "Not seen in any session yet." in text
    assert "deployer has sent no message." in text
    assert "1 active API key carries this name." in text


def test_unknown_and_other_teams_agents_are_not_found(member: Client, world: AgentsWorld) -> None:
    beta = make_tenant("beta").team
    secret = services.session_create(team=beta, external_id="beta-secret")
    services.message_append(session=secret, messages=[{"role": "assistant", "name": "intruder", "content": "hi"}])
    assert member.get(agent_url("intruder")).status_code == 404
    assert member.get(agent_url("nobody")).status_code == 404
    assert member.get(agent_url("run_tests")).status_code == 404  # a tool, not an agent


def test_another_teams_work_under_the_same_name_stays_hidden(member: Client, world: AgentsWorld) -> None:
    beta = make_tenant("beta").team
    secret = services.session_create(team=beta, external_id="beta-secret")
    services.message_append(
        session=secret, messages=[{"role": "assistant", "name": "developer", "content": "beta's secret plan"}]
    )
    text = text_of(member.get(agent_url("developer")).content.decode())
    assert "beta's secret plan" not in text
    assert "beta-secret" not in text


def test_anonymous_users_are_sent_to_log_in(client: Client, world: AgentsWorld) -> None:
    for url in (AGENTS, agent_url("developer")):
        response = client.get(url)
        assert response.status_code == 302
        assert response["Location"].startswith(reverse("login"))


def test_each_section_pages_on_its_own_and_keeps_the_others(member: Client, world: AgentsWorld, monkeypatch) -> None:
    monkeypatch.setattr(agent_pages, "MESSAGES_PER_PAGE", 1)
    monkeypatch.setattr(agent_pages, "SESSIONS_PER_PAGE", 1)
    html = member.get(agent_url("developer", "?sessions_page=2")).content.decode()
    text = text_of(html)
    assert DEVELOPER_REPLY in text and "calls run_tests" not in text  # messages page 1
    assert 'href="?sessions_page=2&amp;page=2#messages"' in html  # next messages keeps the sessions page
    html = member.get(agent_url("developer", "?sessions_page=2&page=2")).content.decode()
    assert "calls run_tests" in text_of(html) and DEVELOPER_REPLY not in text_of(html)
    assert 'href="?sessions_page=1&amp;page=2#sessions"' in html


def test_the_agent_page_takes_a_fixed_number_of_queries(
    member: Client, world: AgentsWorld, tenant: Tenant, django_assert_max_num_queries
) -> None:
    with django_assert_max_num_queries(22) as first:
        member.get(agent_url("developer"))
    for i in range(5):
        session = services.session_create(team=tenant.team, external_id=f"more-{i}", metadata={"agent_name": "dev"})
        services.message_append(
            session=session, messages=[{"role": "assistant", "name": "developer", "content": f"x{n}"} for n in range(5)]
        )
    with django_assert_max_num_queries(len(first.captured_queries)):
        member.get(agent_url("developer"))


def test_names_that_cannot_be_a_path_are_shown_without_a_link(member: Client, tenant: Tenant) -> None:
    session = services.session_create(team=tenant.team, external_id="odd")
    services.message_append(
        session=session,
        messages=[
            {"role": "assistant", "name": "ops/bot", "content": "a"},
            {"role": "assistant", "name": "..", "content": "b"},
        ],
    )
    assert links.agent_url("..") == ""
    assert links.agent_url("a//b") == ""
    html = member.get(AGENTS).content.decode()
    assert f'href="{agent_url("ops/bot")}"' in html
    assert "this name cannot be a page address" in html
    response = member.get(agent_url("ops/bot"))
    assert response.status_code == 200
    assert "ops/bot" in text_of(response.content.decode())


def test_the_per_session_record_page_links_to_the_agent_page(member: Client, world: AgentsWorld) -> None:
    html = member.get(reverse("dashboard:agent_memory", args=[world.rounds_session.pk, "developer"])).content.decode()
    assert f'href="{agent_url("developer")}"' in html
