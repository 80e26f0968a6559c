"""The session page of a long session: a few screens per page, search by role, tool and text,
long output folded, console output monospace, markdown rendered, call arguments as JSON,
images that open enlarged, and a kg session's facts and extraction runs."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from memory_app.conversations import pages as views
from memory_app.conversations import services
from memory_app.conversations.models import Message, Session
from memory_app.tenancy.models import TeamMembership
from tests.conftest import Tenant
from tests.memory_app.conversations.long_session_data import (
    LONG_OUTPUT_LINES,
    PNG_DATA_URL,
    coding_session,
    kg_session,
)


@pytest.fixture
def member(client: Client, tenant: Tenant) -> Client:
    user = get_user_model().objects.create_user("ada", password="correct horse battery")
    TeamMembership.objects.create(team=tenant.team, user=user)
    client.force_login(user)
    return client


@pytest.fixture
def long_session(tenant: Tenant) -> Session:
    return coding_session(tenant.team)


def session_url(session: Session) -> str:
    return reverse("dashboard:session", args=[session.pk])


def seqs(response) -> list[int]:
    return [message.seq for message in response.context["page"].messages]


def test_a_long_session_opens_on_one_short_page(member: Client, long_session: Session) -> None:
    response = member.get(session_url(long_session))

    assert seqs(response) == list(range(1, views.MESSAGES_PER_PAGE + 1))
    html = response.content.decode()
    assert f"messages #1\N{EN DASH}#{views.MESSAGES_PER_PAGE} of 240" in html
    assert f'href="?after={views.MESSAGES_PER_PAGE}"' in html


def test_it_filters_the_timeline_by_role(member: Client, long_session: Session) -> None:
    response = member.get(session_url(long_session), {"role": "user"})

    assert seqs(response) == list(range(1, 4 * views.MESSAGES_PER_PAGE, 4))
    assert response.context["matches"] == 60
    assert "60</span> messages match" in response.content.decode()


def test_it_filters_by_tool_showing_the_calls_with_their_results(member: Client, long_session: Session) -> None:
    response = member.get(session_url(long_session), {"tool": "run_tests"})

    timeline = response.context["timeline"]
    assert response.context["matches"] == 40  # 20 calls and their 20 results
    # Calls only (each result is nested under its call), every one of them to run_tests.
    assert {item.message.role for item in timeline} == {"assistant"}
    assert {call.name for item in timeline for call in item.tool_calls} == {"run_tests"}
    assert all(call.result is not None for item in timeline for call in item.tool_calls)
    html = response.content.decode()
    assert '<option value="run_tests" selected>run_tests</option>' in html


def test_it_searches_message_text_tool_output_and_arguments(member: Client, long_session: Session) -> None:
    by_answer = member.get(session_url(long_session), {"q": "edit `module_7.py"})
    by_output = member.get(session_url(long_session), {"q": "test_case_4_3 "})
    by_argument = member.get(session_url(long_session), {"q": "src/module_12.py"})

    assert seqs(by_answer) == [32]
    assert seqs(by_output) == [19]  # the tool result, shown on its own: its call does not match
    assert by_output.context["timeline"][0].answers.seq == 18
    assert seqs(by_argument) == [50]


def test_text_search_finds_non_ascii_and_quoted_text(member: Client, tenant: Tenant) -> None:
    session = services.session_create(team=tenant.team)
    services.message_append(
        session=session,
        messages=[
            {"role": "user", "content": 'Un Café "très" fort'},
            {"role": "assistant", "content": "plain"},
        ],
    )

    assert seqs(member.get(session_url(session), {"q": "CAFÉ"})) == [1]
    assert seqs(member.get(session_url(session), {"q": "café"})) == [1]
    assert seqs(member.get(session_url(session), {"q": '"très"'})) == [1]


def test_search_pages_keep_the_filters(member: Client, long_session: Session, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(views, "MESSAGES_PER_PAGE", 5)

    first = member.get(session_url(long_session), {"role": "user"})
    second = member.get(session_url(long_session), {"role": "user", "after": seqs(first)[-1]})

    assert seqs(first) == [1, 5, 9, 13, 17]
    assert 'href="?role=user&amp;after=17"' in first.content.decode()
    assert seqs(second) == [21, 25, 29, 33, 37]
    assert second.context["previous_after"] == 0
    assert "?role=user&amp;after=0" in second.content.decode()


def test_long_tool_output_is_folded_in_monospace_with_its_whitespace(member: Client, long_session: Session) -> None:
    html = member.get(session_url(long_session)).content.decode()

    # Cycle 1's run_tests output (seq 7): a preview, then the whole of it behind "Show all".
    fold = html[html.index('id="m7"') :]
    fold = fold[: fold.index("</details>")]
    assert '<pre class="console fold-preview" tabindex="0">' in fold
    assert f'Show all <span class="fold-size">{LONG_OUTPUT_LINES + 2} lines' in fold
    assert '<pre class="console" tabindex="0">============ test session starts' in fold
    assert "test_case_1_0    PASSED    [  0%]" in fold  # spacing kept as printed
    # Folded, it shows its head and its end: the verdict a test run prints last is in view.
    folded = fold[: fold.index('<details class="fold-details">')]
    assert f'<p class="fold-gap muted">… {LONG_OUTPUT_LINES + 2 - 8 - 6} lines hidden …</p>' in folded
    tail = folded[folded.index('<pre class="console fold-preview fold-tail" tabindex="0">') :]
    assert tail.index("test_case_1_79") < tail.index(f"==== {LONG_OUTPUT_LINES} passed ====")
    # A short result is shown whole, unfolded.
    short = html[html.index('id="m3"') :]
    assert short.index('<pre class="console" tabindex="0">ok: read_file finished step 0</pre>') < short.index('id="m4"')


def test_user_and_assistant_text_is_rendered_as_markdown(member: Client, long_session: Session) -> None:
    html = member.get(session_url(long_session)).content.decode()

    answer = html[html.index('id="m4"') : html.index('id="m5"')]
    assert '<p class="md-h md-h2"><strong>Step 0</strong></p>' in answer
    assert "<strong>passed</strong>" in answer and "<code>module_0.py</code>" in answer
    assert "<ul><li>keep the <em>public</em> API</li><li>add a test</li></ul>" in answer
    assert '<pre class="md-code" tabindex="0" data-lang="python"><code>def answer() -&gt; int:' in answer
    assert '<a href="https://docs.python.org/3/" rel="nofollow noopener noreferrer"' in answer
    assert "<em>carefully</em>" in html[html.index('id="m1"') : html.index('id="m2"')]


def test_tool_call_arguments_show_as_indented_json_or_as_sent(member: Client, tenant: Tenant) -> None:
    session = services.session_create(team=tenant.team)
    services.message_append(
        session=session,
        messages=[
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "a", "type": "function", "function": {"name": "f", "arguments": '{"x": {"y": [1, 2]}}'}},
                    {"id": "b", "type": "function", "function": {"name": "g", "arguments": "{not json"}},
                ],
            },
            {"role": "tool", "tool_call_id": "a", "content": "1"},
            {"role": "tool", "tool_call_id": "b", "content": "2"},
        ],
    )

    html = member.get(session_url(session)).content.decode()

    pretty = "{\n  &quot;x&quot;: {\n    &quot;y&quot;: [\n      1,\n      2\n    ]\n  }\n}"
    assert f'<pre class="json args">{pretty}</pre>' in html
    assert "arguments as sent: not valid JSON" in html
    assert '<pre class="console args" tabindex="0">{not json</pre>' in html


def test_images_are_buttons_that_open_the_zoom_dialog(member: Client, long_session: Session) -> None:
    html = member.get(session_url(long_session)).content.decode()

    buttons = re.findall(
        r'<button type="button" class="thumb-zoom" data-zoom-src="([^"]+)"[^>]*aria-label="([^"]+)"', html
    )
    assert buttons and buttons[0] == (PNG_DATA_URL, "Enlarge the image")
    assert '<dialog class="image-zoom" id="image-zoom"' in html
    assert "js/session.js" in html


def test_a_kg_session_shows_its_facts_and_extraction_runs(member: Client, tenant: Tenant) -> None:
    session = kg_session(tenant.team)

    response = member.get(session_url(session))

    html = response.content.decode()
    panel = html[html.index('id="facts-heading"') :]
    assert "Analytical Engines Ltd" in panel and "Charles" in panel
    assert f'href="{reverse("dashboard:facts")}?session={session.pk}"' in panel
    facts = response.context["session_facts"]
    # The two runs made here, and the automatic one the appends queued.
    assert facts.fact_count == 3 and facts.run_count == 3
    assert {run.status for run in facts.runs} == {"done", "failed", "pending"}
    for run in facts.runs:
        assert reverse("dashboard:fact_extraction", args=[run.pk]) in panel
    assert "status-failed" in panel and "LLM timed out" in panel


def test_other_sessions_do_not_show_a_facts_panel(member: Client, long_session: Session) -> None:
    response = member.get(session_url(long_session))

    assert response.context["session_facts"] is None
    assert 'id="facts-heading"' not in response.content.decode()


def test_a_searched_page_takes_a_bounded_number_of_queries(
    member: Client, long_session: Session, django_assert_max_num_queries
) -> None:
    # The plain page plus the match count; no query per message, call or result.
    with django_assert_max_num_queries(16):
        member.get(session_url(long_session), {"role": "assistant", "tool": "run_tests", "q": "module"})


def test_a_kg_page_takes_a_bounded_number_of_queries(
    member: Client, tenant: Tenant, django_assert_max_num_queries
) -> None:
    session = kg_session(tenant.team)

    # The plain page plus four: facts, their count, runs, their count.
    with django_assert_max_num_queries(17):
        member.get(session_url(session))


# --- going to a message ---------------------------------------------------------------------------------------


def test_go_to_a_message_number_opens_the_page_that_starts_with_it(member: Client, long_session: Session) -> None:
    response = member.get(session_url(long_session), {"at": "#137"})

    assert response.status_code == 302
    assert response["Location"] == session_url(long_session) + "?after=136#m137"
    landed = member.get(response["Location"].split("#")[0])
    assert seqs(landed)[0] == 137
    assert 'name="at" id="timeline-at"' in landed.content.decode()


def test_go_to_a_time_opens_the_first_message_said_then(member: Client, long_session: Session) -> None:
    moment = timezone.now() - timedelta(hours=3)
    Message.objects.filter(session=long_session, seq__lt=90).update(occurred_at=moment - timedelta(hours=1))
    Message.objects.filter(session=long_session, seq__gte=90).update(occurred_at=moment + timedelta(minutes=1))
    local = timezone.localtime(moment).strftime("%Y-%m-%d %H:%M")

    response = member.get(session_url(long_session), {"at": local})

    assert response["Location"] == session_url(long_session) + "?after=89#m90"


def test_go_to_something_that_is_no_number_or_time_says_why(member: Client, long_session: Session) -> None:
    response = member.get(session_url(long_session), {"at": "yesterday-ish"}, follow=True)

    assert "is neither a message number (#1234) nor a time" in response.content.decode()


def test_a_search_match_links_to_its_place_in_the_whole_timeline(member: Client, long_session: Session) -> None:
    html = member.get(session_url(long_session), {"role": "user"}).content.decode()

    match = html[html.index('id="m5"') :]
    assert f'<a class="in-context" href="{session_url(long_session)}?after=4#m5">in context</a>' in match
