"""A message's index items carry the time it was said (`occurred_at`) when its writer gave it,
else the time it was stored, and the search's `from`/`to` filter on that time."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest
from django.utils.dateparse import parse_datetime
from rest_framework.test import APIClient

from memory_app.conversations import services
from memory_app.conversations.models import Message, Session
from memory_app.search.models import SearchItem, SearchKind
from tests.conftest import Tenant
from tests.memory_app.search.test_indexing import run_index

pytestmark = pytest.mark.usefixtures("job_outbox")  # sends are recorded, never reach a broker


def when(text: str) -> datetime:
    moment = parse_datetime(text)
    assert moment is not None
    return moment


def dated_session(tenant: Tenant, *messages: dict[str, Any]) -> tuple[Session, list[Message]]:
    session = services.session_create(team=tenant.team)
    return session, list(services.message_append(session=session, messages=list(messages)).messages)


def item_time(message: Message) -> datetime:
    return SearchItem.objects.get(kind=SearchKind.MESSAGE, message_id=message.pk).occurred_at


def hits(api: APIClient, query: str, **body: Any) -> list[str]:
    response = api.post("/api/v1/search/", {"query": query, **body}, format="json")
    assert response.status_code == 200, response.content
    return [hit["text"] for hit in response.json()["results"]]


def test_a_dated_messages_index_item_has_the_time_it_was_said(tenant: Tenant) -> None:
    _, (dated, undated) = dated_session(
        tenant,
        {"role": "user", "content": "kayak trip", "occurred_at": when("2025-07-14T18:30:00+02:00")},
        {"role": "user", "content": "kayak repair"},
    )
    run_index(tenant.team.pk)

    assert item_time(dated) == when("2025-07-14T16:30:00Z")
    assert item_time(undated) == undated.created_at  # no time given: when it was stored, as before


def test_correcting_a_messages_time_moves_its_index_item(tenant: Tenant) -> None:
    _, (message,) = dated_session(tenant, {"role": "user", "content": "kayak trip"})
    run_index(tenant.team.pk)

    services.message_update(message=message, data={"occurred_at": when("2024-01-02T03:04:05Z")})

    assert item_time(message) == when("2024-01-02T03:04:05Z")


def test_from_and_to_find_messages_by_the_time_they_were_said(api: APIClient, tenant: Tenant) -> None:
    dated_session(
        tenant,
        {"role": "user", "content": "kayak in june", "occurred_at": when("2025-06-20T10:00:00Z")},
        {"role": "user", "content": "kayak in july", "occurred_at": when("2025-07-14T10:00:00Z")},
        {"role": "user", "content": "kayak in august", "occurred_at": when("2025-08-03T10:00:00Z")},
        {"role": "user", "content": "kayak today"},
    )
    run_index(tenant.team.pk)
    july = {"from": "2025-07-01T00:00:00Z", "to": "2025-08-01T00:00:00Z"}

    assert hits(api, "kayak", **july) == ["kayak in july"]
    assert sorted(hits(api, "kayak", to="2025-07-01T00:00:00Z")) == ["kayak in june"]
    assert sorted(hits(api, "kayak", **{"from": "2025-08-01T00:00:00Z"})) == ["kayak in august", "kayak today"]


def test_from_and_to_include_both_ends(api: APIClient, tenant: Tenant) -> None:
    dated_session(tenant, {"role": "user", "content": "kayak at noon", "occurred_at": when("2025-07-14T12:00:00Z")})
    run_index(tenant.team.pk)
    noon = "2025-07-14T12:00:00Z"

    assert hits(api, "kayak", **{"from": noon}) == ["kayak at noon"]
    assert hits(api, "kayak", to=noon) == ["kayak at noon"]
    assert hits(api, "kayak", **{"from": "2025-07-14T12:00:00.001Z"}) == []
