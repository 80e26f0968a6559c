"""Each served context in the usage ledger, broken down into system prompt, summary, recalled
memories, window and reply priming: recorded by the code that builds the context, shown on the
session page (latest few) and on a page of its own."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from memory_app.compaction import services as compaction
from memory_app.compaction.models import CompactionRun
from memory_app.conversations import services
from memory_app.conversations.models import MemoryType, Session
from memory_app.models import ContextServe
from memory_app.tenancy.models import TeamMembership
from tests.conftest import Tenant
from tests.memory_app.search.test_indexing import run_index

pytestmark = pytest.mark.usefixtures("job_outbox")
SYSTEM_PROMPT = "You plan trips and keep answers short."


@pytest.fixture
def member(client: Client, tenant: Tenant) -> Client:
    user = get_user_model().objects.create_user("ada", password="correct horse battery")
    TeamMembership.objects.create(team=tenant.team, user=user)
    client.force_login(user)
    return client


def turns(first: int, count: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for n in range(first, first + count):
        out.append({"role": "user", "content": f"question {n}: where do we sleep in Oslo on night {n}?"})
        out.append({"role": "assistant", "content": f"answer {n}: the hotel by the fjord. " + "It has a view. " * 20})
    return out


def compacted_session(tenant: Tenant) -> Session:
    session = services.session_create(
        team=tenant.team,
        external_id="oslo-trip",
        system_prompt=SYSTEM_PROMPT,
        memory_type=MemoryType.MANAGED_CONVERSATION,
        memory_config={"threshold_tokens": 100_000},
    )
    services.message_append(session=session, messages=turns(1, 4))
    run, _ = compaction.compaction_request(session=session, trigger=CompactionRun.Trigger.MANUAL)
    assert compaction.compaction_execute(run_id=str(run.pk)) == "done"
    services.message_append(session=session, messages=turns(5, 2))
    return session


def read_context(api: APIClient, session: Session, **params: Any) -> dict[str, Any]:
    response = api.get(f"/api/v1/sessions/{session.pk}/context/", params)
    assert response.status_code == 200, response.content
    return response.json()


def parts_of(serve: ContextServe) -> dict[str, int | None]:
    return {name: getattr(serve, f"{name}_tokens") for name in ("system", "summary", "recall", "window", "priming")}


def test_a_served_context_records_its_parts_and_they_add_up_to_what_was_sent(api, tenant) -> None:
    session = compacted_session(tenant)

    body = read_context(api, session)

    serve = ContextServe.objects.get(session=session)
    parts = parts_of(serve)
    assert sum(parts.values()) == serve.served_tokens == body["token_count"]
    assert parts["system"] == session.system_prompt_tokens > 0
    assert parts["summary"] > 0  # the summary (and the instruction it keeps) stands in for #1-#8
    assert parts["recall"] == 0
    assert parts["window"] > 0
    assert parts["priming"] == 3


def test_recalled_memories_are_their_own_part(api, tenant) -> None:
    earlier = services.session_create(team=tenant.team, system_prompt=SYSTEM_PROMPT)
    services.message_append(
        session=earlier,
        messages=[
            {"role": "user", "content": "why did the kestrel migration fail?"},
            {"role": "assistant", "content": "the kestrel migration failed because the disk quota was full"},
        ],
    )
    run_index(tenant.team.pk)
    session = services.session_create(team=tenant.team, system_prompt=SYSTEM_PROMPT)
    services.message_append(session=session, messages=turns(1, 2))

    body = read_context(api, session, recall="kestrel migration disk")

    serve = ContextServe.objects.get(session=session)
    assert serve.recall_tokens == body["recall"]["token_count"] > 0
    assert sum(parts_of(serve).values()) == serve.served_tokens == body["token_count"]


def test_the_session_page_shows_the_latest_served_contexts_by_part(api, member, tenant) -> None:
    session = compacted_session(tenant)
    read_context(api, session)
    read_context(api, session, last=2)
    serves = list(ContextServe.objects.filter(session=session).order_by("-created_at", "-pk"))

    html = member.get(reverse("dashboard:session", args=[session.pk])).content.decode()

    section = html[html.index('id="served-contexts"') : html.index("</section>", html.index('id="served-contexts"'))]
    for serve in serves:
        assert reverse("dashboard:served_context", args=[serve.pk]) in section
        assert re.search(rf'class="num served-total" title="{serve.served_tokens} tokens sent in all', section)
        assert f'title="Summary: {serve.summary_tokens} tokens"' in section
        assert f'title="Window: {serve.window_tokens} tokens"' in section
    assert section.count('class="ctx-bar"') == 2


def test_the_served_context_page_shows_each_part_and_a_sum_equal_to_what_was_sent(api, member, tenant) -> None:
    session = compacted_session(tenant)
    body = read_context(api, session)
    serve = ContextServe.objects.get(session=session)

    response = member.get(reverse("dashboard:served_context", args=[serve.pk]))

    assert response.status_code == 200
    html = response.content.decode()
    shown = [int(n) for n in re.findall(r'<td class="num part-tokens" title="[^"]+">(\d+)</td>', html)]
    assert shown == list(parts_of(serve).values())
    assert f'<td class="num parts-total" title="the parts add up to the {body["token_count"]} tokens sent">' in html
    assert sum(shown) == body["token_count"]
    assert "System prompt" in html and "Recalled memories" in html and "Reply priming" in html


def test_a_context_served_before_the_parts_were_kept_says_so(member, tenant) -> None:
    session = services.session_create(team=tenant.team, system_prompt=SYSTEM_PROMPT)
    serve = ContextServe.objects.create(team=tenant.team, session=session, raw_tokens=90, served_tokens=40)

    html = member.get(reverse("dashboard:served_context", args=[serve.pk])).content.decode()

    assert "served before the ledger kept its parts: only its total (40 tokens) is known" in html


def test_another_teams_served_context_is_404(member, tenant, other_tenant) -> None:
    theirs = services.session_create(team=other_tenant.team, system_prompt=SYSTEM_PROMPT)
    serve = ContextServe.objects.create(team=other_tenant.team, session=theirs, raw_tokens=90, served_tokens=40)

    assert member.get(reverse("dashboard:served_context", args=[serve.pk])).status_code == 404
    assert member.get(reverse("dashboard:served_context", args=[serve.pk + 1000])).status_code == 404


def test_the_served_context_page_needs_a_login(client: Client, tenant) -> None:
    session = services.session_create(team=tenant.team, system_prompt=SYSTEM_PROMPT)
    serve = ContextServe.objects.create(team=tenant.team, session=session, raw_tokens=90, served_tokens=40)

    response = client.get(reverse("dashboard:served_context", args=[serve.pk]))

    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_the_served_context_page_takes_a_fixed_number_of_queries(
    api, member, tenant, django_assert_num_queries
) -> None:
    session = compacted_session(tenant)
    read_context(api, session, recall="hotel")
    serve = ContextServe.objects.get(session=session)

    # session + user, teams (2 with the auth lookup: 3); the served context with its session (1);
    # its replay record (1); the ids of the session's previous and next records (2)
    with django_assert_num_queries(7):
        member.get(reverse("dashboard:served_context", args=[serve.pk]))
