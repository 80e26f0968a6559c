"""Session page for compaction: raw history beside the active context, the token gauge, the
ledger with each run's before/after, and the revert and compact-now forms."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from memory_app.compaction import panels as compaction_panels
from memory_app.compaction import services as compaction
from memory_app.compaction.models import CompactionRun
from memory_app.conversations import context, services
from memory_app.conversations import pages as views
from memory_app.conversations.models import MemoryType, Message, Session
from memory_app.jobs.dispatchers import Sent
from memory_app.tenancy.models import TeamMembership
from tests.conftest import Tenant
from tests.job_dispatch import Sends

MANAGED_CONFIG = {"threshold_tokens": 100_000, "active_context": {"summarization": {"grace_recent_messages": 1}}}


@pytest.fixture(autouse=True)
def sent(job_outbox: list[Sent]) -> Sends:
    """Compaction tasks recorded instead of going to a broker."""
    return Sends(job_outbox, compaction.JOB)


@pytest.fixture
def user(tenant: Tenant):
    user = get_user_model().objects.create_user("ada", password="correct horse battery")
    TeamMembership.objects.create(team=tenant.team, user=user)
    return user


@pytest.fixture
def member(client: Client, user) -> Client:
    client.force_login(user)
    return client


def managed_session(tenant: Tenant, **fields) -> Session:
    defaults = {
        "external_id": "planner",
        "system_prompt": "You plan trips.",
        "memory_type": MemoryType.MANAGED_CONVERSATION,
        "memory_config": MANAGED_CONFIG,
    }
    return services.session_create(team=tenant.team, **{**defaults, **fields})


DETAIL = " The room faces the water and breakfast is served from seven until ten every morning." * 4


def turns(first: int, count: int) -> list[dict]:
    """User/assistant pairs whose first sentences (what the extractive summary keeps) are short."""
    out: list[dict] = []
    for n in range(first, first + count):
        out.append({"role": "user", "content": f"question {n}: where should we stay in Oslo on night {n}?"})
        out.append({"role": "assistant", "content": f"answer {n}: the hotel by the fjord, night {n} booked.{DETAIL}"})
    return out


def compact(session: Session) -> CompactionRun:
    """Queue and run a compaction in-process (offline extractive backend)."""
    run, created = compaction.compaction_request(session=session, trigger=CompactionRun.Trigger.MANUAL)
    assert created
    assert compaction.compaction_execute(run_id=str(run.pk)) == "done"
    run.refresh_from_db()
    return run


def session_with_compaction(tenant: Tenant, **fields) -> tuple[Session, CompactionRun]:
    session = managed_session(tenant, **fields)
    services.message_append(session=session, messages=turns(1, 4))
    run = compact(session)
    services.message_append(session=session, messages=turns(5, 1))
    session.refresh_from_db()
    return session, run


def session_url(session: Session) -> str:
    return reverse("dashboard:session", args=[session.pk])


def revert_url(session: Session, run: CompactionRun) -> str:
    return reverse("dashboard:compaction_revert", args=[session.pk, run.pk])


def compact_url(session: Session) -> str:
    return reverse("dashboard:session_compact", args=[session.pk])


def flashes(response) -> list[str]:
    return [str(message) for message in response.context["messages"]]


def pane(html: str, css_class: str) -> str:
    """The HTML of one of the page's two panes."""
    start = html.index(f'class="pane {css_class}"')
    end = html.index("</aside>", start) if css_class == "pane-context" else html.index("</section>\n\n  <aside", start)
    return html[start:end]


# --- the two panes ----------------------------------------------------------------------------


def test_it_shows_the_raw_history_beside_the_active_context(member: Client, tenant: Tenant) -> None:
    session, run = session_with_compaction(tenant)

    response = member.get(session_url(session))

    html = response.content.decode()
    raw, active = pane(html, "pane-raw"), pane(html, "pane-context")
    # Raw history: every message, the covered ones marked as summarised.
    assert all(f'id="m{seq}"' in raw for seq in range(1, 11))
    assert raw.count('class="pill summarised"') == run.covered_to_seq
    assert "question 1: where should we stay" in raw
    # Active context: system prompt, original instruction, the summary, then what came after.
    head = response.context["context_head"]
    assert [m.kind for m in head[:2]] == ["system", "instruction"]
    assert head[1].seq == 1
    assert {m.kind for m in head[2:]} == {"summary"}
    assert len(head) == 1 + len(run.summary)  # the summary keeps the instruction in front
    tail = response.context["context_messages"]
    assert [m.seq for m in tail] == list(range(run.covered_to_seq + 1, 11))
    assert all(m.tokens == Message.objects.get(session=session, seq=m.seq).token_count for m in tail)
    assert "[Compacted Context Summary]" in active
    assert "answer 5: the hotel by the fjord, night 5 booked. The room faces" in active
    assert "answer 2: the hotel by the fjord, night 2 booked. The room faces" not in active  # summarised away
    built = context.context_build(session=session)
    assert response.context["active_context"].token_count == built.token_count
    assert len(head) + len(tail) == len(built.messages)


def test_context_seqs_link_to_the_raw_message_on_this_page_or_its_page(
    member: Client, tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(views, "MESSAGES_PER_PAGE", 4)
    session, _ = session_with_compaction(tenant)

    first_page = member.get(session_url(session)).content.decode()
    latest_page = member.get(session_url(session) + "?latest=1").content.decode()

    assert '<a class="seq-inline" href="?after=9#m10"' in first_page
    assert '<a class="seq-inline" href="#m10"' in latest_page


def test_a_conversation_history_session_shows_its_window_and_no_compaction_controls(
    member: Client, tenant: Tenant
) -> None:
    session = services.session_create(team=tenant.team, system_prompt="Be brief.")
    services.message_append(session=session, messages=turns(1, 2))

    response = member.get(session_url(session))

    html = response.content.decode()
    assert [m.seq for m in response.context["context_messages"]] == [1, 2, 3, 4]
    assert "Compact now" not in html
    assert 'id="compactions"' not in html
    assert "no compaction threshold" in html
    assert "only managed sessions are compacted" in html


def test_tool_outputs_shortened_for_the_context_are_marked(member: Client, tenant: Tenant) -> None:
    # Over its threshold, with summarization off: the read applies tool truncation.
    config = {
        "threshold_tokens": 150,
        "active_context": {
            "min_reduction_ratio": 0.1,
            "summarization": {"enabled": False},
            "excluded_processors": ["backward_packing"],
            "tool_truncation": {"max_tool_message_tokens": 10, "grace_recent_messages": 1},
        },
    }
    session = managed_session(tenant, memory_config=config)
    call = {"id": "call_1", "type": "function", "function": {"name": "search", "arguments": "{}"}}
    services.message_append(
        session=session,
        messages=[
            {"role": "user", "content": "search hotels"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_1", "content": "hotel " * 200},
            {"role": "assistant", "content": "Found many."},
            {"role": "user", "content": "thanks"},
            {"role": "assistant", "content": "You're welcome."},
        ],
    )

    response = member.get(session_url(session))

    tail = {m.seq: m for m in response.context["context_messages"]}
    assert sorted(tail) == [1, 2, 3, 4, 5, 6]
    assert tail[3].truncated and tail[3].tokens is not None and tail[3].tokens < 40
    assert not tail[4].truncated and tail[4].tokens is not None
    assert 'title="shortened by tool_truncation">truncated</span>' in response.content.decode()


# --- the gauge ----------------------------------------------------------------------------------


def test_the_gauge_shows_active_tokens_against_the_threshold(member: Client, tenant: Tenant) -> None:
    session = managed_session(tenant, memory_config={"threshold_tokens": 200})
    services.message_append(session=session, messages=turns(1, 2))
    session.refresh_from_db()

    response = member.get(session_url(session))

    gauge = response.context["gauge"]
    assert gauge.tokens == session.active_tokens > 0
    assert gauge.threshold == 200
    assert gauge.target == 120  # threshold x (1 - min_reduction_ratio 0.4)
    html = response.content.decode()
    assert re.search(rf'class="gauge-tokens" title="[^"]+">{session.active_tokens:,}</abbr>', html)
    assert re.search(r'class="gauge-threshold" title="compaction threshold: 200 tokens[^"]*">200</abbr>', html)
    percent = round(100 * session.active_tokens / 200)
    assert re.search(rf'class="gauge-percent" title="[^"]+">{percent}%</abbr>', html)
    assert f'style="width: {min(100 * session.active_tokens / 200, 100):.1f}%"' in html
    assert 'style="left: 60.0%"' in html


def test_the_gauge_turns_red_over_the_threshold(member: Client, tenant: Tenant) -> None:
    session = managed_session(tenant, memory_config={"threshold_tokens": 20})
    services.message_append(session=session, messages=turns(1, 3))  # queues a threshold run (not executed)

    html = member.get(session_url(session)).content.decode()

    assert 'class="gauge gauge-over"' in html
    assert 'style="width: 100.0%"' in html
    assert "over: a compaction is due" in html
    assert "Waiting for a worker" in html  # the queued run, in the ledger


def test_the_gauge_falls_after_a_compaction_and_rises_again_on_revert(member: Client, tenant: Tenant) -> None:
    session = managed_session(tenant)
    services.message_append(session=session, messages=turns(1, 6))
    session.refresh_from_db()
    before = session.active_tokens

    compact(session)
    after = member.get(session_url(session)).context["gauge"].tokens
    run = CompactionRun.objects.get(session=session)
    member.post(revert_url(session, run))
    reverted = member.get(session_url(session)).context["gauge"].tokens

    assert after < before
    assert reverted == before


# --- the ledger and its diffs -------------------------------------------------------------------


def test_each_compaction_shows_the_raw_messages_it_covered_and_the_summary(member: Client, tenant: Tenant) -> None:
    session, run = session_with_compaction(tenant)

    response = member.get(session_url(session))

    (view,) = response.context["runs"]
    assert view.run == run
    assert [m.seq for m in view.before] == list(range(1, run.covered_to_seq + 1))
    assert [m.kind for m in view.before] == ["raw"] * run.covered_to_seq
    assert [m.role for m in view.after] == [m["role"] for m in run.summary]
    html = response.content.decode()
    ledger = html[html.index('id="compactions"') : html.index('class="panes"')]
    diff = ledger[ledger.index('class="run-diff"') :]
    before, after = diff.split('class="diff-side diff-after"')
    assert "question 2: where should we stay in Oslo" in before
    assert "[Compacted Context Summary]" not in before
    assert "[Compacted Context Summary]" in after
    assert f"#1\N{EN DASH}#{run.covered_to_seq}" in ledger
    assert f"{run.pre_tokens} → {run.post_tokens}" in ledger
    assert f"{run.pre_messages} → {run.post_messages}" in ledger
    assert f"\N{MINUS SIGN}{round(100 * (run.pre_tokens - run.post_tokens) / run.pre_tokens)}%" in ledger
    assert run.backend in ledger


def test_a_second_compaction_covers_only_what_came_after_the_first(member: Client, tenant: Tenant) -> None:
    session, first = session_with_compaction(tenant)
    services.message_append(session=session, messages=turns(6, 3))
    second = compact(session)

    response = member.get(session_url(session))

    newest, older = response.context["runs"]
    assert (newest.run, older.run) == (second, first)
    assert second.covered_from_seq == first.covered_to_seq
    assert [m.seq for m in newest.before] == list(range(first.covered_to_seq + 1, second.covered_to_seq + 1))
    assert newest.revertable and not older.revertable
    html = response.content.decode()
    assert html.count(">Revert</button>") == 1
    assert f'action="{revert_url(session, second)}"' in html
    assert "after the previous summary" in html


def test_a_long_range_shows_its_first_messages_and_links_to_the_rest(
    member: Client, tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(compaction_panels, "DIFF_MESSAGES_SHOWN", 3)
    session, _ = session_with_compaction(tenant)

    response = member.get(session_url(session))

    (view,) = response.context["runs"]
    assert [m.seq for m in view.before] == [1, 2, 3]
    assert view.more_before
    assert "read the whole range in the timeline" in response.content.decode()


def test_a_failed_run_shows_its_error_and_no_diff(member: Client, tenant: Tenant) -> None:
    session = managed_session(tenant)
    CompactionRun.objects.create(
        team=tenant.team, session=session, trigger="threshold", status="failed", attempts=4, error="<b>429</b> quota"
    )

    html = member.get(session_url(session)).content.decode()

    assert "Failed</strong> after 4 attempts: &lt;b&gt;429&lt;/b&gt; quota" in html
    assert "Before / after" not in html
    assert ">Revert</button>" not in html


def test_summary_text_is_escaped(member: Client, tenant: Tenant) -> None:
    session = managed_session(tenant)
    services.message_append(session=session, messages=turns(1, 3))
    evil = "<script>alert('x')</script>"
    CompactionRun.objects.create(
        team=tenant.team,
        session=session,
        trigger="manual",
        status="done",
        covered_from_seq=0,
        covered_to_seq=4,
        summary=[{"role": "assistant", "content": evil, "name": evil, "token_count": 9}],
        backend=evil,
    )

    html = member.get(session_url(session)).content.decode()

    assert "<script>alert" not in html
    assert html.count("&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;") >= 3  # diff, context, backend


# --- revert ---------------------------------------------------------------------------------------


def test_revert_calls_the_service_and_the_summary_leaves_the_context(member: Client, tenant: Tenant) -> None:
    session, run = session_with_compaction(tenant)

    response = member.post(revert_url(session, run), follow=True)

    run.refresh_from_db()
    assert run.status == CompactionRun.Status.REVERTED
    assert response.redirect_chain == [(session_url(session) + "#compactions", 302)]
    assert flashes(response) == [
        "Compaction reverted: its summary no longer stands in for those messages. Automatic compaction "
        "waits for new messages (Compact now still works)."
    ]
    assert [m.kind for m in response.context["context_head"]] == ["system"]
    assert [m.seq for m in response.context["context_messages"]] == list(range(1, 11))
    assert response.context["covered_to"] is None
    assert "status-reverted" in response.content.decode()


def test_after_a_revert_the_page_says_automatic_compaction_waits(member: Client, tenant: Tenant) -> None:
    # Over its threshold, the reverted session is not compacted again by itself: the gauge says why
    # and until when, and still offers "Compact now".
    session, run = session_with_compaction(tenant)
    services.session_update(session=session, data={"memory_config": {"threshold_tokens": 200}})
    member.post(revert_url(session, run))

    html = member.get(session_url(session)).content.decode()

    assert 'class="gauge gauge-over"' in html
    held = re.search(r'<p class="gauge-hold">Automatic compaction: (.*?)\.</p>', html)
    assert held is not None
    assert re.fullmatch(r"paused after a revert until \d+ more tokens of new messages \(or Compact now\)", held[1])
    assert f'action="{compact_url(session)}"' in html


def test_reverting_a_run_that_is_not_the_latest_shows_the_conflict(member: Client, tenant: Tenant) -> None:
    session, first = session_with_compaction(tenant)
    services.message_append(session=session, messages=turns(6, 3))
    compact(session)

    response = member.post(revert_url(session, first), follow=True)

    first.refresh_from_db()
    assert first.status == CompactionRun.Status.DONE
    assert flashes(response) == ["Only the latest completed compaction can be reverted (revert later ones first)."]
    assert 'class="flash-error"' in response.content.decode()


def test_reverting_twice_shows_the_conflict_the_second_time(member: Client, tenant: Tenant) -> None:
    session, run = session_with_compaction(tenant)
    member.post(revert_url(session, run))

    response = member.post(revert_url(session, run), follow=True)

    assert flashes(response)[-1].startswith("Only the latest completed compaction can be reverted")


def test_the_revert_form_posts_with_a_csrf_token(user, tenant: Tenant) -> None:
    session, run = session_with_compaction(tenant)
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    html = client.get(session_url(session)).content.decode()
    form = re.search(
        r'<form method="post" action="([^"]+revert/)".*?name="csrfmiddlewaretoken" value="([^"]+)"', html, re.S
    )
    assert form is not None

    refused = client.post(form.group(1))
    accepted = client.post(form.group(1), {"csrfmiddlewaretoken": form.group(2)})

    assert refused.status_code == 403
    assert accepted.status_code == 302
    run.refresh_from_db()
    assert run.status == CompactionRun.Status.REVERTED


# --- compact now ----------------------------------------------------------------------------------


def test_compact_now_queues_a_manual_run_once(
    member: Client, tenant: Tenant, sent: Sends, django_capture_on_commit_callbacks
) -> None:
    session = managed_session(tenant)
    services.message_append(session=session, messages=turns(1, 3))

    with django_capture_on_commit_callbacks(execute=True):
        first = member.post(compact_url(session), follow=True)
    second = member.post(compact_url(session), follow=True)

    run = CompactionRun.objects.get(session=session)
    assert (run.status, run.trigger) == ("pending", "manual")
    assert sent.ids == [str(run.pk)]
    assert flashes(first) == ["Compaction queued: a worker will summarise the older messages shortly."]
    assert flashes(second) == ["A compaction is already pending for this session; nothing new was queued."]
    assert first.redirect_chain == [(session_url(session) + "#compaction-panel", 302)]


def test_the_compact_button_shows_only_on_managed_sessions(member: Client, tenant: Tenant) -> None:
    managed = managed_session(tenant)
    empty = managed_session(tenant, external_id="empty")
    services.message_append(session=managed, messages=turns(1, 6))
    plain = services.session_create(team=tenant.team)

    managed_html = member.get(session_url(managed)).content.decode()
    assert f'action="{compact_url(managed)}"' in managed_html
    assert re.search(r'class="gauge-threshold" title="[^"]+">100,000</abbr>', managed_html)
    assert "Compact now" not in member.get(session_url(plain)).content.decode()
    # Nothing to summarise yet: the button would only be refused, so it is disabled and says why.
    empty_html = member.get(session_url(empty)).content.decode()
    assert f'action="{compact_url(empty)}"' not in empty_html
    assert '<button type="button" class="btn" disabled aria-describedby="compact-blocked">Compact now</button>' in (
        empty_html
    )
    assert "Nothing to compact now: every message after the latest summary is in the protected tail" in empty_html


# --- team scoping ---------------------------------------------------------------------------------


def test_another_teams_session_cannot_be_seen_compacted_or_reverted(
    member: Client, tenant: Tenant, other_tenant: Tenant
) -> None:
    theirs, run = session_with_compaction(other_tenant)

    assert member.get(session_url(theirs)).status_code == 404
    assert member.post(compact_url(theirs)).status_code == 404
    assert member.post(revert_url(theirs, run)).status_code == 404

    run.refresh_from_db()
    assert run.status == CompactionRun.Status.DONE
    assert CompactionRun.objects.filter(session=theirs).count() == 1


def test_a_run_of_another_session_is_404_under_mine(member: Client, tenant: Tenant) -> None:
    mine = managed_session(tenant, external_id="mine")
    _, other_run = session_with_compaction(tenant, external_id="other")

    assert member.post(revert_url(mine, other_run)).status_code == 404
    other_run.refresh_from_db()
    assert other_run.status == CompactionRun.Status.DONE


def test_the_actions_need_a_login_and_a_post(client: Client, member: Client, tenant: Tenant) -> None:
    session, run = session_with_compaction(tenant)
    anonymous = Client()

    for url in (compact_url(session), revert_url(session, run)):
        response = anonymous.post(url)
        assert response.status_code == 302
        assert response["Location"].startswith(reverse("login"))
        assert member.get(url).status_code == 405
    run.refresh_from_db()
    assert run.status == CompactionRun.Status.DONE
    assert CompactionRun.objects.filter(session=session).count() == 1


# --- cost -----------------------------------------------------------------------------------------


def test_the_page_of_a_compacted_session_takes_a_fixed_number_of_queries(
    member: Client, tenant: Tenant, django_assert_num_queries
) -> None:
    session, _ = session_with_compaction(tenant)
    services.message_append(session=session, messages=turns(6, 3))
    compact(session)
    services.message_append(session=session, messages=turns(9, 20))

    # session + user, teams, session, page, previous cursor, totals (7); the gauge: whether
    # anything can be compacted (latest run, newest rows) (2); the served context: latest run,
    # the rows after it (2); ledger: runs (the panel's newest run too) + one per run's range (3);
    # what recall injected (1); the latest served contexts (1); the timeline's tool names (1)
    with django_assert_num_queries(17):
        member.get(session_url(session))
