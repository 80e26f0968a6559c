"""The session page's compaction panel: "Compact now" offered exactly when the service would
accept it, the partial the page polls to follow a run to its end, and memory_config in words."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from memory_app.compaction import panels as compaction_panels
from memory_app.compaction import services as compaction
from memory_app.compaction.models import CompactionRun
from memory_app.conversations import services
from memory_app.conversations.models import Session
from memory_app.jobs.dispatchers import Sent
from memory_app.tenancy.models import TeamMembership
from memsite.errors import Conflict
from tests.conftest import Tenant
from tests.job_dispatch import Sends
from tests.memory_app.compaction.test_pages import compact, compact_url, managed_session, session_url, turns


@pytest.fixture(autouse=True)
def sent(job_outbox: list[Sent]) -> Sends:
    """Compaction tasks recorded instead of going to a broker."""
    return Sends(job_outbox, compaction.JOB)


@pytest.fixture
def member(client: Client, tenant: Tenant) -> Client:
    user = get_user_model().objects.create_user("ada", password="correct horse battery")
    TeamMembership.objects.create(team=tenant.team, user=user)
    client.force_login(user)
    return client


def status_url(session: Session) -> str:
    return reverse("dashboard:session_compaction_status", args=[session.pk])


def offers_compact_now(client: Client, session: Session) -> bool:
    html = client.get(session_url(session)).content.decode()
    return f'action="{compact_url(session)}"' in html


def service_accepts(session: Session) -> bool:
    try:
        compaction.compaction_request(session=session, trigger=CompactionRun.Trigger.MANUAL)
    except Conflict:
        return False
    return True


# --- the predicate ----------------------------------------------------------------------------


def test_compact_now_is_offered_exactly_when_the_service_accepts_a_request(member: Client, tenant: Tenant) -> None:
    empty = managed_session(tenant, external_id="empty")
    one_round = managed_session(tenant, external_id="one-round")
    services.message_append(session=one_round, messages=turns(1, 1))
    long = managed_session(tenant, external_id="long")
    services.message_append(session=long, messages=turns(1, 5))
    just_compacted = managed_session(tenant, external_id="just-compacted")
    services.message_append(session=just_compacted, messages=turns(1, 5))
    compact(just_compacted)
    summarization_off = managed_session(
        tenant,
        external_id="summarization-off",
        memory_config={"threshold_tokens": 1000, "active_context": {"summarization": {"enabled": False}}},
    )
    services.message_append(session=summarization_off, messages=turns(1, 5))

    offered = {
        s.external_id: offers_compact_now(member, s)
        for s in (empty, one_round, long, just_compacted, summarization_off)
    }
    accepted = {s.external_id: service_accepts(s) for s in (empty, one_round, long, just_compacted, summarization_off)}

    assert (
        offered
        == accepted
        == {
            "empty": False,
            "one-round": True,  # the question before the protected answer
            "long": True,
            "just-compacted": False,
            "summarization-off": False,
        }
    )


def test_a_session_with_nothing_to_compact_shows_a_disabled_button_and_why(member: Client, tenant: Tenant) -> None:
    session = managed_session(tenant)
    services.message_append(session=session, messages=turns(1, 5))
    compact(session)

    html = member.get(session_url(session)).content.decode()

    assert '<button type="button" class="btn" disabled aria-describedby="compact-blocked">Compact now</button>' in html
    assert re.search(
        r'id="compact-blocked">Nothing to compact now: every message after the latest summary is in the protected '
        r"tail \(summarization.grace_recent_messages = 1\)\.</p>",
        html,
    )


def test_while_a_run_is_queued_the_panel_follows_it_instead_of_offering_the_button(
    member: Client, tenant: Tenant
) -> None:
    session = managed_session(tenant)
    services.message_append(session=session, messages=turns(1, 5))
    member.post(compact_url(session))

    html = member.get(session_url(session)).content.decode()

    assert f'action="{compact_url(session)}"' not in html
    assert 'class="run-status run-status-pending" role="status"' in html
    assert "Manual compaction queued" in html and "waiting for a worker" in html
    assert f'data-live-url="{status_url(session)}" data-live-seconds="2"' in html


# --- the partial ------------------------------------------------------------------------------


def test_the_partial_follows_a_run_from_pending_through_running_to_done(member: Client, tenant: Tenant) -> None:
    session = managed_session(tenant)
    services.message_append(session=session, messages=turns(1, 5))
    run, _ = compaction.compaction_request(session=session, trigger=CompactionRun.Trigger.MANUAL)

    pending = member.get(status_url(session)).content.decode()
    CompactionRun.objects.filter(pk=run.pk).update(status="running", attempts=1, started_at=timezone.now())
    running = member.get(status_url(session)).content.decode()
    CompactionRun.objects.filter(pk=run.pk).update(status="pending", attempts=0)
    assert compaction.compaction_execute(run_id=str(run.pk)) == "done"
    run.refresh_from_db()
    done = member.get(status_url(session)).content.decode()

    assert "<html" not in pending  # a partial, not a page
    assert "run-status-pending" in pending and "waiting for a worker" in pending
    assert "run-status-running" in running and "A worker is summarising" in running and "(attempt 1)" in running
    assert "run-status-done" in done
    assert f">{run.pre_tokens} → {run.post_tokens}</abbr> tokens" in done
    assert f">{run.pre_messages} → {run.post_messages}</abbr> messages" in done
    assert run.post_tokens < run.pre_tokens
    assert f'href="{session_url(session)}#run-{run.pk}"' in done
    assert "Reload" not in done


def test_the_partial_shows_why_a_run_failed(member: Client, tenant: Tenant) -> None:
    session = managed_session(tenant)
    services.message_append(session=session, messages=turns(1, 5))
    CompactionRun.objects.create(
        team=tenant.team, session=session, trigger="manual", status="failed", attempts=4, error="429 Too Many Requests"
    )

    html = member.get(status_url(session)).content.decode()

    assert "run-status-failed" in html and "Latest compaction ended failed" in html
    assert "429 Too Many Requests" in html
    assert f'action="{compact_url(session)}"' in html  # something to compact: offered again


def test_the_partial_is_team_scoped_and_needs_a_login(
    client: Client, member: Client, tenant: Tenant, other_tenant: Tenant
) -> None:
    theirs = managed_session(other_tenant)
    mine = managed_session(tenant)

    assert member.get(status_url(theirs)).status_code == 404
    client.logout()
    response = client.get(status_url(mine))
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_the_partial_takes_a_fixed_number_of_queries(member: Client, tenant: Tenant, django_assert_num_queries) -> None:
    session = managed_session(tenant)
    services.message_append(session=session, messages=turns(1, 5))
    compact(session)
    services.message_append(session=session, messages=turns(6, 3))

    # session + user, teams (3); the session (1); the newest run (1); whether anything can be
    # compacted: latest done run, newest rows (2); the ledger sent along: its runs, their first
    # messages, the run a revert may undo (3)
    with django_assert_num_queries(10):
        member.get(status_url(session))


def test_the_partial_of_an_active_run_skips_the_blocker(
    member: Client, tenant: Tenant, django_assert_num_queries
) -> None:
    session = managed_session(tenant)
    services.message_append(session=session, messages=turns(1, 5))
    compaction.compaction_request(session=session, trigger=CompactionRun.Trigger.MANUAL)

    # session + user, teams (3); the session; the newest run; the ledger: its runs, the run a revert may undo
    with django_assert_num_queries(7):
        member.get(status_url(session))


# --- memory_config in words -------------------------------------------------------------------


def test_the_session_page_states_its_memory_config_in_words_with_units(member: Client, tenant: Tenant) -> None:
    session = managed_session(
        tenant,
        memory_config={
            "threshold_tokens": 20_000,
            "active_context": {
                "min_reduction_ratio": 0.5,
                "excluded_processors": ["tool_truncation"],
                "summarization": {"grace_recent_messages": 2, "output_max_tokens": 2000},
                "tool_truncation": {"max_tool_message_tokens": 800},
            },
        },
    )

    html = member.get(session_url(session)).content.decode()

    lines = dict(re.findall(r"<dt>([^<]+)</dt><dd>([^<]+) <small", html[html.index('id="memory-config"') :]))
    assert lines["Compaction threshold"] == (
        "20,000 tokens of active context; passing it queues a compaction after an append or a context read"
    )
    assert lines["Compaction target"].startswith("10,000 tokens (the threshold less 50%)")
    assert lines["Processors, in order"] == "summarization → backward packing"
    assert lines["Tool truncation"].startswith("off; tool outputs over 800 tokens are cut")
    assert lines["Summarization"].startswith(
        "on; the newest 2 assistant turns and what follows are never summarised; a summary is at most 2,000 tokens"
    )
    assert lines["Images"] == "each image counts as 800 tokens"


def test_a_conversation_history_session_has_no_memory_config_panel(member: Client, tenant: Tenant) -> None:
    plain = services.session_create(team=tenant.team)

    assert 'id="memory-config"' not in member.get(session_url(plain)).content.decode()


def test_config_lines_read_the_same_derived_figures_as_the_services() -> None:
    config = compaction.memory_config.parse_config({"threshold_tokens": 1000})

    lines = {line.label: line.value for line in compaction_panels.memory_config_lines(config)}

    assert lines["Compaction target"].startswith(f"{config.compaction_target_tokens:,} tokens")
    assert f"a summary is at most {compaction.summary_budget(config):,} tokens" in lines["Summarization"]


@pytest.mark.parametrize("grace", [0, 1])
def test_a_grace_of_zero_reads_as_the_newest_turn_as_the_pipeline_treats_it(grace: int) -> None:
    config = compaction.memory_config.parse_config(
        {"active_context": {"summarization": {"grace_recent_messages": grace}}}
    )

    lines = {line.label: line.value for line in compaction_panels.memory_config_lines(config)}

    assert "the newest assistant turn and what follows are never summarised" in lines["Summarization"]


def test_the_partial_sends_the_ledger_along_in_the_same_state_as_the_panel(member: Client, tenant: Tenant) -> None:
    session = managed_session(tenant)
    services.message_append(session=session, messages=turns(1, 5))
    run, _ = compaction.compaction_request(session=session, trigger=CompactionRun.Trigger.MANUAL)

    html = member.get(status_url(session)).content.decode()

    assert f'data-live-state="{run.pk}:pending"' in html  # the page swaps the ledger when this changes
    ledger = html[html.index('<template data-live-swap="compactions">') :]
    assert f'<li class="run status-pending" id="run-{run.pk}">' in ledger
    assert 'data-live-settles="compaction"' not in html  # the "queued" message stays while it waits
