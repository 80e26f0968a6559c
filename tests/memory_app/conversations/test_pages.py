"""Dashboard pages: team scoping, the sessions list and the session timeline."""

from __future__ import annotations

import base64
import re
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from memory_app.conversations import pages as views
from memory_app.conversations import services
from memory_app.conversations.models import MemoryType, Message, Session
from memory_app.tenancy.models import TeamMembership
from tests.conftest import Tenant, make_tenant

# A real 1x1 PNG, so the data URL passes the API's magic-byte check.
PNG_1X1 = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d49444154789c6360f8cfc0f01f0005000201a5f0d2"
        "7a0000000049454e44ae426082"
    )
).decode()
PNG_DATA_URL = f"data:image/png;base64,{PNG_1X1}"


@pytest.fixture
def user(tenant: Tenant):
    user = get_user_model().objects.create_user("ada", password="correct horse battery")
    TeamMembership.objects.create(team=tenant.team, user=user)
    return user


@pytest.fixture
def member(client: Client, user) -> Client:
    client.force_login(user)
    return client


def new_session(tenant: Tenant, **fields) -> Session:
    return services.session_create(team=tenant.team, **fields)


def append(session: Session, *messages: dict) -> list[Message]:
    return services.message_append(session=session, messages=list(messages)).messages


def call(call_id: str, name: str, arguments: str = "{}") -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def session_url(session: Session, query: str = "") -> str:
    return reverse("dashboard:session", args=[session.pk]) + query


# --- access and teams ---------------------------------------------------------------------


def test_it_sends_anonymous_visitors_to_the_login_page(client: Client, tenant: Tenant) -> None:
    session = new_session(tenant)
    for url in (reverse("dashboard:sessions"), session_url(session)):
        response = client.get(url)
        assert response.status_code == 302
        assert response["Location"].startswith(reverse("login"))


def test_it_logs_in_through_the_form_with_csrf(user) -> None:
    client = Client(enforce_csrf_checks=True)
    page = client.get(reverse("login"))
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.content.decode()).group(1)

    refused = client.post(reverse("login"), {"username": "ada", "password": "correct horse battery"})
    assert refused.status_code == 403

    response = client.post(
        reverse("login"), {"username": "ada", "password": "correct horse battery", "csrfmiddlewaretoken": token}
    )
    assert response.status_code == 302
    assert response["Location"] == reverse("dashboard:sessions")


def test_every_form_on_the_pages_carries_a_csrf_token(member: Client, tenant: Tenant, user) -> None:
    TeamMembership.objects.create(team=make_tenant("gamma").team, user=user)
    session = new_session(tenant)
    for url in (reverse("dashboard:sessions"), session_url(session)):
        html = member.get(url).content.decode()
        post_forms = re.findall(r'<form method="post".*?</form>', html, flags=re.S)
        assert len(post_forms) == 2  # team switch + log out
        assert all("csrfmiddlewaretoken" in form for form in post_forms)


def test_it_lists_only_the_current_teams_sessions(member: Client, tenant: Tenant, other_tenant: Tenant) -> None:
    new_session(tenant, external_id="mine")
    new_session(other_tenant, external_id="theirs")

    html = member.get(reverse("dashboard:sessions")).content.decode()

    assert "mine" in html
    assert "theirs" not in html


def test_another_teams_session_page_is_404(member: Client, other_tenant: Tenant) -> None:
    theirs = new_session(other_tenant, system_prompt="secret plans")

    response = member.get(session_url(theirs))

    assert response.status_code == 404
    assert b"secret plans" not in response.content


def test_a_user_in_no_team_is_told_so(client: Client, tenant: Tenant) -> None:
    client.force_login(get_user_model().objects.create_user("loner"))

    response = client.get(reverse("dashboard:sessions"))

    assert response.status_code == 403
    assert b"not a member of any team" in response.content


def test_a_member_of_several_teams_can_switch_team(member: Client, user, tenant: Tenant) -> None:
    gamma = make_tenant("gamma")
    TeamMembership.objects.create(team=gamma.team, user=user)
    new_session(tenant, external_id="alpha-session")
    new_session(gamma, external_id="gamma-session")
    gamma_only = new_session(gamma)

    first = member.get(reverse("dashboard:sessions")).content.decode()
    assert "alpha-session" in first  # teams in name order: alpha first
    assert member.get(session_url(gamma_only)).status_code == 404

    response = member.post(reverse("dashboard:switch_team"), {"team": gamma.team.pk})
    assert response.status_code == 302

    after = member.get(reverse("dashboard:sessions")).content.decode()
    assert "gamma-session" in after
    assert "alpha-session" not in after
    assert member.get(session_url(gamma_only)).status_code == 200


def test_it_refuses_to_switch_to_a_team_the_user_is_not_in(
    member: Client, tenant: Tenant, other_tenant: Tenant
) -> None:
    new_session(other_tenant, external_id="theirs")

    assert member.post(reverse("dashboard:switch_team"), {"team": other_tenant.team.pk}).status_code == 404
    assert member.post(reverse("dashboard:switch_team"), {"team": "nope"}).status_code == 404
    assert member.get(reverse("dashboard:switch_team"), {"team": tenant.team.pk}).status_code == 405
    assert "theirs" not in member.get(reverse("dashboard:sessions")).content.decode()


def test_a_team_left_after_choosing_it_is_no_longer_shown(member: Client, user, tenant: Tenant) -> None:
    gamma = make_tenant("gamma")
    membership = TeamMembership.objects.create(team=gamma.team, user=user)
    new_session(gamma, external_id="gamma-session")
    member.post(reverse("dashboard:switch_team"), {"team": gamma.team.pk})

    membership.delete()

    assert "gamma-session" not in member.get(reverse("dashboard:sessions")).content.decode()


# --- sessions list ------------------------------------------------------------------------


def test_it_searches_external_id_and_system_prompt_text(member: Client, tenant: Tenant) -> None:
    new_session(tenant, external_id="billing-bot-7", system_prompt="You sort invoices.")
    new_session(tenant, external_id="support-1", system_prompt="You answer questions about PARCELS.")
    new_session(tenant, external_id="other", system_prompt="Nothing here.")

    by_id = member.get(reverse("dashboard:sessions"), {"q": "billing"}).content.decode()
    by_prompt = member.get(reverse("dashboard:sessions"), {"q": "parcels"}).content.decode()

    assert "billing-bot-7" in by_id
    assert "support-1" not in by_id
    assert "support-1" in by_prompt
    assert "billing-bot-7" not in by_prompt
    assert "other" not in by_prompt.split("<tbody>")[1]


def test_it_filters_by_memory_type_and_created_range(member: Client, tenant: Tenant) -> None:
    kg = new_session(tenant, external_id="kg-one", memory_type=MemoryType.KG)
    old = new_session(tenant, external_id="old-one")
    new_session(tenant, external_id="fresh-one")
    Session.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=30))
    Session.objects.filter(pk=kg.pk).update(created_at=timezone.now() - timedelta(days=3))
    today = timezone.localdate()

    typed = member.get(reverse("dashboard:sessions"), {"memory_type": "kg"}).content.decode()
    recent = member.get(
        reverse("dashboard:sessions"), {"created_after": str(today - timedelta(days=5)), "created_before": str(today)}
    ).content.decode()
    older = member.get(
        reverse("dashboard:sessions"), {"created_before": str(today - timedelta(days=10))}
    ).content.decode()

    assert "kg-one" in typed and "old-one" not in typed and "fresh-one" not in typed
    assert "kg-one" in recent and "fresh-one" in recent and "old-one" not in recent
    assert "old-one" in older and "kg-one" not in older


def test_it_shows_invalid_filters_as_errors_without_failing(member: Client, tenant: Tenant) -> None:
    new_session(tenant, external_id="still-listed")

    response = member.get(
        reverse("dashboard:sessions"), {"created_after": "not-a-date", "memory_type": "bogus", "q": "still"}
    )

    assert response.status_code == 200
    html = response.content.decode()
    assert "still-listed" in html
    assert "Enter a valid date." in html


def test_it_shows_message_counts_and_last_activity(member: Client, tenant: Tenant) -> None:
    busy = new_session(tenant, external_id="busy")
    new_session(tenant, external_id="quiet")
    append(busy, {"role": "user", "content": "one"}, {"role": "assistant", "content": "two"})
    append(busy, {"role": "user", "content": "three"})

    response = member.get(reverse("dashboard:sessions"), {"order": "activity"})

    rows = {s.external_id: s for s in response.context["page"]}
    assert rows["busy"].message_count == 3
    assert rows["quiet"].message_count == 0
    # appends bump the session's updated_at inside the same transaction as the insert
    last_message = Message.objects.filter(session=busy).latest("seq").created_at
    assert abs((rows["busy"].last_activity - last_message).total_seconds()) < 1
    assert rows["busy"].last_activity > rows["quiet"].last_activity
    assert response.context["page"][0].external_id == "busy"
    assert re.search(r'<td class="num"><span title="3 stored messages">3</span></td>', response.content.decode())


def test_it_paginates_and_keeps_the_filters_in_page_links(member: Client, tenant: Tenant) -> None:
    for index in range(views.SESSIONS_PER_PAGE + 5):
        new_session(tenant, external_id=f"batch-{index:02d}")
    new_session(tenant, external_id="unrelated")

    first = member.get(reverse("dashboard:sessions"), {"q": "batch"})
    second = member.get(reverse("dashboard:sessions"), {"q": "batch", "page": 2})

    assert len(first.context["page"]) == views.SESSIONS_PER_PAGE
    assert len(second.context["page"]) == 5
    assert "?q=batch&amp;page=2" in first.content.decode()
    assert first.context["page"].paginator.count == views.SESSIONS_PER_PAGE + 5


def test_the_list_takes_a_fixed_number_of_queries(member: Client, tenant: Tenant, django_assert_num_queries) -> None:
    for index in range(5):
        append(new_session(tenant, external_id=f"s{index}"), {"role": "user", "content": "hi"})

    # session + user, teams, count, page, the page's agents
    with django_assert_num_queries(6):
        member.get(reverse("dashboard:sessions"))


# --- session timeline ---------------------------------------------------------------------


def test_it_shows_the_timeline_with_its_fields_and_token_totals(member: Client, tenant: Tenant) -> None:
    session = new_session(tenant, external_id="multi", system_prompt="You are the planner.")
    append(
        session,
        {"role": "user", "content": "Plan the trip", "send_from": "human", "send_to": "planner"},
        {
            "role": "assistant",
            "content": "Asking the booker",
            "name": "planner",
            "send_from": "planner",
            "send_to": "booker",
        },
    )
    messages = list(Message.objects.filter(session=session))

    response = member.get(session_url(session))

    html = response.content.decode()
    assert "You are the planner." in html
    assert 'id="m1"' in html and 'id="m2"' in html
    assert "#1" in html and "#2" in html
    assert 'class="from">human</span> → <span class="to">planner</span>' in html
    assert 'class="from">planner</span> → <span class="to">booker</span>' in html
    assert '<span class="name" title="name">planner</span>' in html
    for message in messages:
        assert f"{message.token_count} tokens" in html
    total = sum(m.token_count for m in messages) + session.system_prompt_tokens
    assert response.context["history_tokens"] == total
    assert f"<dt>Raw history</dt><dd>{total} tokens <small" in html


def test_it_shows_each_tool_result_under_its_call(member: Client, tenant: Tenant) -> None:
    session = new_session(tenant)
    append(
        session,
        {"role": "user", "content": "Weather in Oslo and Rome?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                call("call_oslo", "get_weather", '{"city": "Oslo"}'),
                call("call_rome", "get_weather", '{"city": "Rome"}'),
            ],
        },
        # Results arrive in the other order; each must still sit under its own call.
        {"role": "tool", "tool_call_id": "call_rome", "content": "Rome: 24C sunny"},
        {"role": "tool", "tool_call_id": "call_oslo", "content": '{"city": "Oslo", "temp_c": 3}'},
        {"role": "assistant", "content": "Oslo is cold, Rome is warm."},
    )

    response = member.get(session_url(session))

    timeline = response.context["timeline"]
    assert [item.message.seq for item in timeline] == [1, 2, 5]  # tool results are nested, not listed
    calls = {c.call_id: c for c in timeline[1].tool_calls}
    assert calls["call_oslo"].result.seq == 4
    assert calls["call_rome"].result.seq == 3
    html = response.content.decode()
    oslo_block = html[html.index("call_oslo") : html.index("call_rome")]
    assert 'id="m4"' in oslo_block
    assert "&quot;temp_c&quot;: 3" in oslo_block  # JSON result pretty-printed
    assert '"city": "Oslo"' in oslo_block.replace("&quot;", '"')  # arguments pretty-printed
    rome_block = html[html.index("call_rome") : html.index('id="m5"')]
    assert "Rome: 24C sunny" in rome_block


def test_a_result_on_the_next_page_shows_under_its_call_and_points_back(
    member: Client, tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(views, "MESSAGES_PER_PAGE", 2)
    session = new_session(tenant)
    append(
        session,
        {"role": "user", "content": "search please"},
        {"role": "assistant", "content": None, "tool_calls": [call("call_s", "web_search", '{"q": "memsite"}')]},
        {"role": "tool", "tool_call_id": "call_s", "content": "three hits"},
    )

    first = member.get(session_url(session))
    second = member.get(session_url(session, "?after=2"))

    assert first.context["timeline"][1].tool_calls[0].result.seq == 3
    assert "three hits" in first.content.decode()
    standalone = second.context["timeline"][0]
    assert standalone.message.seq == 3
    assert standalone.answers.seq == 2
    assert "result of" in second.content.decode()
    assert "?after=1#m2" in second.content.decode()


def test_it_pages_long_sessions_by_seq(member: Client, tenant: Tenant, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(views, "MESSAGES_PER_PAGE", 10)
    session = new_session(tenant)
    append(session, *({"role": "user", "content": f"message {n}"} for n in range(1, 26)))

    first = member.get(session_url(session))
    middle = member.get(session_url(session, "?after=10"))
    latest = member.get(session_url(session, "?latest=1"))

    assert [m.seq for m in first.context["page"].messages] == list(range(1, 11))
    assert 'href="?after=10"' in first.content.decode()
    assert first.context["previous_after"] is None
    assert [m.seq for m in middle.context["page"].messages] == list(range(11, 21))
    assert middle.context["previous_after"] == 0
    assert [m.seq for m in latest.context["page"].messages] == list(range(16, 26))
    assert latest.context["previous_after"] == 5
    assert "messages #16\N{EN DASH}#25 of 25" in latest.content.decode()


def test_it_escapes_stored_text_everywhere(member: Client, tenant: Tenant) -> None:
    evil = "<script>alert('x')</script>"
    session = new_session(tenant, external_id=evil, system_prompt=evil, metadata={"note": evil})
    append(
        session,
        {"role": "user", "content": evil, "name": evil, "send_from": evil, "send_to": evil},
        {"role": "user", "content": [{"type": "text", "text": evil}]},
        {"role": "user", "content": {"html": evil}},
        {"role": "assistant", "content": None, "tool_calls": [call(evil, evil, evil)], "structured_data": {"x": evil}},
        {"role": "tool", "tool_call_id": evil, "content": evil},
    )

    for url in (session_url(session), reverse("dashboard:sessions")):
        html = member.get(url).content.decode()
        assert "<script>alert" not in html
        assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in html


def test_it_shows_data_and_http_images_as_thumbnails_and_nothing_else(member: Client, tenant: Tenant) -> None:
    session = new_session(tenant)
    append(
        session,
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "what is in these?"},
                {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
            ],
            "images": [PNG_DATA_URL],
        },
    )
    # Rows written around the API (old imports, manual SQL) must not turn into unsafe tags.
    Message.objects.create(
        session=session,
        seq=2,
        role="user",
        content=[{"type": "image_url", "image_url": {"url": "javascript:alert(1)"}}],
        images=["file:///etc/passwd", "data:image/svg+xml;base64,PHN2Zz48L3N2Zz4=", "/var/data/x.png", 42],
    )

    # Remote images load only when the reader asks (tests/security/test_csp.py covers the default).
    html = member.get(session_url(session, "?remote_images=1")).content.decode()

    timeline = html[html.index('<ol class="timeline">') :]
    timeline = timeline[: timeline.index("</ol>")]
    sources = re.findall(r'<img src="([^"]*)"', timeline)
    assert sources == ["https://example.com/cat.png", PNG_DATA_URL]  # content parts, then images
    assert re.findall(r'<img src="([^"]*)"', html) == sources * 2  # again in the active context pane
    assert "javascript:" not in html
    assert "file:///etc/passwd" not in html
    assert "data:image/svg+xml" not in html  # the favicon link names the type; no image is one
    assert timeline.count("image not shown") == 5
    assert html.count("image not shown") == 10


def test_it_renders_json_content_and_content_parts_readably(member: Client, tenant: Tenant) -> None:
    session = new_session(tenant)
    append(
        session,
        {"role": "user", "content": {"task": "summarise", "pages": [1, 2]}},
        {"role": "assistant", "content": [{"type": "refusal", "refusal": "I cannot"}, {"type": "text", "text": "ok"}]},
    )

    html = member.get(session_url(session)).content.decode()

    assert '<pre class="json">{\n  &quot;task&quot;: &quot;summarise&quot;,' in html
    assert "<strong>Refused:</strong> I cannot" in html
    assert '<div class="md"><p>ok</p></div>' in html


def test_the_timeline_takes_a_fixed_number_of_queries(
    member: Client, tenant: Tenant, django_assert_num_queries
) -> None:
    session = new_session(tenant)
    for n in range(5):
        append(
            session,
            {"role": "assistant", "content": None, "tool_calls": [call(f"c{n}", "lookup")]},
            {"role": "tool", "tool_call_id": f"c{n}", "content": "done"},
        )

    # session + user, teams, session, page, previous cursor, totals (every result is on the page);
    # the served context: window, a user message to borrow (there is none); the compaction
    # ledger (empty); the contexts recall put memories into (none); the tool filter's names;
    # the latest served contexts (usage ledger)
    with django_assert_num_queries(13):
        member.get(session_url(session))


def test_it_ignores_cursors_and_team_ids_the_database_cannot_hold(member: Client, tenant: Tenant) -> None:
    session = new_session(tenant)
    append(session, {"role": "user", "content": "first"})
    huge = "9" * 30

    for query in (f"?after={huge}", "?after=-5", "?after=\uff11\uff12", f"?after={2**63}"):
        response = member.get(session_url(session, query))
        assert response.status_code == 200, query
        assert "first" in response.content.decode()
    assert member.post(reverse("dashboard:switch_team"), {"team": huge}).status_code == 404
    assert member.get(reverse("dashboard:sessions"), {"page": huge}).status_code == 200
