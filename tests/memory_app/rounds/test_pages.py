"""Dashboard pages of multi-agent memory: a session's rounds and an agent's work record."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from memory_app.conversations.models import Session
from memory_app.rounds import pages as round_pages
from memory_app.rounds import services as rounds
from memory_app.tenancy.models import TeamMembership
from tests.conftest import Tenant, make_tenant
from tests.memory_app.rounds.multi_agent_data import BLOCKER, CODE, FAILED_ATTEMPT, build_multi_agent_session

pytestmark = pytest.mark.django_db


@pytest.fixture
def member(client: Client, tenant: Tenant) -> Client:
    user = get_user_model().objects.create_user("ada", password="correct horse battery")
    TeamMembership.objects.create(team=tenant.team, user=user)
    client.force_login(user)
    return client


@pytest.fixture
def session(tenant: Tenant) -> Session:
    return build_multi_agent_session(tenant.team)


def rounds_url(session: Session, query: str = "") -> str:
    return reverse("dashboard:session_rounds", args=[session.pk]) + query


def agent_url(session: Session, agent: str) -> str:
    return reverse("dashboard:agent_memory", args=[session.pk, agent])


def text_of(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


# --- access -------------------------------------------------------------------------------


def test_another_teams_session_and_agent_are_not_found(member: Client) -> None:
    foreign = build_multi_agent_session(make_tenant("beta").team, external_id="secret-analysis")

    assert member.get(rounds_url(foreign)).status_code == 404
    assert member.get(agent_url(foreign, "developer")).status_code == 404


def test_an_unknown_agent_is_not_found(member: Client, session: Session) -> None:
    assert member.get(agent_url(session, "nobody")).status_code == 404


def test_anonymous_users_are_sent_to_log_in(client: Client, session: Session) -> None:
    response = client.get(rounds_url(session))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_the_session_page_links_to_the_rounds(member: Client, session: Session) -> None:
    page = member.get(reverse("dashboard:session", args=[session.pk])).content.decode()
    assert f'href="{rounds_url(session)}"' in page


# --- the round view -----------------------------------------------------------------------


def test_rounds_show_their_query_state_posts_and_typed_attachments(member: Client, session: Session) -> None:
    response = member.get(rounds_url(session))
    assert response.status_code == 200
    views = response.context["rounds"]
    assert [(r.round.user_query, r.round.state) for r in views] == [
        ("How many rows does sales.csv have?", "finished"),
        ("Plot the monthly revenue.", "failed"),
        ("Plot the monthly amount instead.", "created"),
    ]
    assert [(p.send_from, p.send_to) for p in views[0].posts] == [
        ("User", "Planner"),
        ("Planner", "CodeInterpreter"),
        ("CodeInterpreter", "Planner"),
        ("Planner", "User"),
    ]
    reply = views[0].posts[2]
    assert [(a.type, a.group, a.is_code) for a in reply.attachments] == [
        ("thought", "code", False),
        ("reply_content", "code", True),
        ("execution_status", "execution", False),
        ("execution_result", "execution", True),
    ]
    html = response.content.decode()
    assert html.count('class="card round-card') == 3
    assert 'class="pill state-pill state-failed"' in html
    assert '<span class="att-type">code_error</span>' in html
    assert "df = pd.read_csv(&#x27;sales.csv&#x27;)" in html  # the code, escaped, whitespace kept
    assert CODE.splitlines()[0] in text_of(html)


def test_it_lists_shared_memory_with_scope_and_marks_what_is_in_effect(member: Client, session: Session) -> None:
    entries = member.get(rounds_url(session)).context["shared_memory"]
    assert [(e.entry.type, e.entry.scope, e.entry.content, e.in_effect) for e in entries] == [
        ("plan", "conversation", "load, count, report", False),  # the Planner's newer plan replaced it
        ("note", "round", "amount, not revenue", False),  # round-scoped, in an earlier round
        ("plan", "round", "plot amount by month", True),
    ]
    html = member.get(rounds_url(session)).content.decode()
    assert html.count('<span class="pill effect-pill">in effect</span>') == 1


def test_it_links_every_agent_of_the_session(member: Client, session: Session) -> None:
    html = member.get(rounds_url(session)).content.decode()
    assert f'href="{agent_url(session, "developer")}"' in html
    assert f'href="{agent_url(session, "reviewer")}"' in html


def test_taskweaver_roles_get_distinct_colours_and_every_role_a_stable_one() -> None:
    taskweaver_roles = ["User", "Planner", "CodeInterpreter", "WebExplorer"]
    hues = [round_pages.role_hue(role) for role in taskweaver_roles]
    # At least 30 degrees apart on the colour wheel, so no two TaskWeaver roles look alike.
    assert all(min(abs(a - b), 360 - abs(a - b)) >= 30 for i, a in enumerate(hues) for b in hues[i + 1 :])
    assert round_pages.role_hue("developer") == round_pages.role_hue("developer")
    assert round_pages.role_hue("developer") in round_pages.ROLE_PALETTE


def test_rounds_are_paged_by_cursor(member: Client, session: Session, monkeypatch) -> None:
    monkeypatch.setattr(round_pages, "ROUNDS_PER_PAGE", 2)
    first = member.get(rounds_url(session))
    assert [r.round.order for r in first.context["rounds"]] == [1, 2]
    assert 'href="?after=2"' in first.content.decode()
    second = member.get(rounds_url(session, "?after=2"))
    assert [r.round.order for r in second.context["rounds"]] == [3]
    assert second.context["next_after"] is None


def test_the_round_view_takes_a_fixed_number_of_queries(
    member: Client, tenant: Tenant, session: Session, django_assert_num_queries
) -> None:
    # auth session + user, teams, session, rounds, posts, attachments, in-effect entries, all entries, agents
    with django_assert_num_queries(10):
        member.get(rounds_url(session))
    for index in range(5):
        round_, _ = rounds.round_create(session=session, user_query=f"query {index}")
        for _post in range(3):
            rounds.post_create(
                round_=round_,
                post={
                    "message": "m",
                    "send_from": "Planner",
                    "send_to": "CodeInterpreter",
                    "attachment_list": [{"type": "thought", "content": "t"}, {"type": "plan", "content": "p"}],
                },
            )
    with django_assert_num_queries(10):
        assert len(member.get(rounds_url(session)).context["rounds"]) == 8
    empty = Session.objects.create(team=tenant.team, external_id="empty")
    with django_assert_num_queries(8):  # no rounds: no posts or attachments to read
        member.get(rounds_url(empty))


# --- an agent's memory --------------------------------------------------------------------


def test_the_agent_page_puts_every_kind_on_one_timeline_by_time(member: Client, session: Session) -> None:
    response = member.get(agent_url(session, "developer"))
    assert response.status_code == 200
    assert [(item.kind, item.entry_id) for item in response.context["timeline"]] == [
        ("decision", "decision-001"),
        ("attempt", "attempt-001"),
        ("discovery", "discovery-001"),
        ("discovery", "discovery-002"),
        ("decision", "decision-002"),
        ("discovery", "discovery-003"),
        ("discovery", "discovery-004"),
        ("attempt", "attempt-002"),
        ("attempt", "attempt-003"),
    ]
    assert response.context["counts"] == {"discovery": 4, "attempt": 3, "decision": 2}
    assert response.context["failures"] == 1


def test_failed_attempts_are_highlighted_with_their_error_and_lessons(member: Client, session: Session) -> None:
    html = member.get(agent_url(session, "developer")).content.decode()
    failed = re.search(
        r'<li class="entry kind-attempt failure result-failure" id="attempt-003">'
        r'(.*?)</li>\s*(?=<li class="entry|</ol>)',
        html,
        re.S,
    )
    assert failed is not None
    body = text_of(failed.group(1))
    assert "step 2" in body and "failure" in body
    assert FAILED_ATTEMPT["error"] in body
    for lesson in FAILED_ATTEMPT["lessons"]:
        assert lesson in body
    assert html.count(" failure result-failure") == 1  # the successful and in-progress ones are not


def test_the_context_shows_the_current_step_and_blockers(member: Client, session: Session) -> None:
    html = member.get(agent_url(session, "developer")).content.decode()
    step = re.search(r'<dd class="current-step">(.*?)</dd>', html, re.S)
    assert step is not None and text_of(step.group(1)).split()[:2] == ["2", "in_progress"]
    assert f"<li>{BLOCKER}</li>" in html


def test_archived_entries_are_shown_collapsed_with_the_history(member: Client, session: Session) -> None:
    response = member.get(agent_url(session, "developer"))
    assert [item.entry_id for item in response.context["archived"]] == ["discovery-000"]
    assert "discovery-000" not in [item.entry_id for item in response.context["timeline"]]
    html = response.content.decode()
    archive = html[html.index('<details class="card archive"') :]
    assert 'id="archived-discovery-000"' in archive
    assert "discovery-000 [dependency_check/low] The repository pins Deno 1.x" in archive  # the history line


def test_the_agent_page_takes_a_fixed_number_of_queries(
    member: Client, session: Session, django_assert_num_queries
) -> None:
    # auth session + user, teams, session, memory, entries, the agents list
    with django_assert_num_queries(7):
        member.get(agent_url(session, "developer"))
    with django_assert_num_queries(7):
        member.get(agent_url(session, "reviewer"))
