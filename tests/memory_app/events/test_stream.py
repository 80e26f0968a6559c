"""`GET /api/v1/events/stream/` over real HTTP: a live server thread and httpx streaming."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import httpx
import pytest
from django.utils import timezone

from memory_app.conversations import services
from memory_app.events.models import EventStreamLease, MemoryEvent
from memory_app.events.services import EventCursor, event_record
from tests.conftest import Tenant, make_tenant
from tests.worker_process import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


@dataclass
class Sse:
    id: int
    event: str
    data: dict[str, Any]


@pytest.fixture(autouse=True)
def fast_stream(settings: Any) -> None:
    settings.SSE_POLL_SECONDS = 0.05
    settings.SSE_HEARTBEAT_SECONDS = 0.2
    settings.SSE_MAX_SECONDS = 20.0


@pytest.fixture
def alpha() -> Tenant:
    return make_tenant("stream-alpha")


@pytest.fixture
def beta() -> Tenant:
    return make_tenant("stream-beta")


def parse(lines: Iterator[str]) -> Iterator[Sse | str]:
    """SSE messages as they come, and comments (heartbeats, the opening line) as strings."""
    fields: dict[str, str] = {}
    for line in lines:
        if line.startswith(":"):
            yield line
        elif line == "":
            if "data" in fields:
                yield Sse(id=int(fields["id"]), event=fields["event"], data=json.loads(fields["data"]))
            fields = {}
        else:
            name, _, value = line.partition(": ")
            fields[name] = value


def stream(url: str, key: str | None, **kwargs: Any) -> Any:
    headers = {"Accept": "text/event-stream", **kwargs.pop("headers", {})}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    return httpx.stream("GET", f"{url}/api/v1/events/stream/", headers=headers, timeout=10.0, **kwargs)


def record(tenant: Tenant, kind: str, session: Any = None, **data: Any) -> MemoryEvent:
    return event_record(team_id=tenant.team.pk, session=session, kind=kind, data=data)


def test_events_written_after_the_stream_opened_arrive_in_order_with_their_ids(
    live_server: Any, alpha: Tenant, beta: Tenant
) -> None:
    session = services.session_create(team=alpha.team)
    other_session = services.session_create(team=alpha.team)
    before = record(alpha, MemoryEvent.Kind.RESET, session, note="before the stream")
    record(beta, MemoryEvent.Kind.RESET, None, note="another team's: its id is not alpha's to see")
    with stream(live_server.url, alpha.key, params={"session": str(session.pk)}) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        messages = parse(response.iter_lines())
        assert next(messages) == f": stream open after event {before.pk}"
        written = [
            record(alpha, MemoryEvent.Kind.COMPACTION_STARTED, session, n=1),
            record(alpha, MemoryEvent.Kind.RESET, other_session, n=99),  # another session: not in this stream
            record(beta, MemoryEvent.Kind.RESET, None, n=98),  # another team: never
            record(alpha, MemoryEvent.Kind.COMPACTION_COMPLETED, session, n=2),
            record(alpha, MemoryEvent.Kind.FACTS_EXTRACTED, session, n=3),
        ]
        received = []
        for message in messages:
            if isinstance(message, Sse):
                received.append(message)
            if len(received) == 3:
                break
    expected = [written[0], written[3], written[4]]
    assert [m.id for m in received] == [e.pk for e in expected]
    assert [m.event for m in received] == ["compaction_started", "compaction_completed", "facts_extracted"]
    assert [m.data["data"]["n"] for m in received] == [1, 2, 3]
    assert {m.data["session_id"] for m in received} == {str(session.pk)}
    assert [m.data["id"] for m in received] == [m.id for m in received]


def test_a_stream_without_a_session_carries_every_event_of_the_team_only(
    live_server: Any, alpha: Tenant, beta: Tenant
) -> None:
    one, two = services.session_create(team=alpha.team), services.session_create(team=alpha.team)
    with stream(live_server.url, alpha.key) as response:
        messages = parse(response.iter_lines())
        next(messages)
        mine = [record(alpha, MemoryEvent.Kind.RESET, one), record(beta, MemoryEvent.Kind.RESET)]
        mine.append(record(alpha, MemoryEvent.Kind.EXPERIENCE_APPROVED, None, exp_id="x"))
        mine.append(record(alpha, MemoryEvent.Kind.RESET, two))
        received = []
        for message in messages:
            if isinstance(message, Sse):
                received.append(message)
            if len(received) == 3:
                break
    assert [m.id for m in received] == [mine[0].pk, mine[2].pk, mine[3].pk]
    assert received[1].data["session_id"] is None


def test_resuming_from_last_event_id_gets_only_later_events(live_server: Any, alpha: Tenant, settings: Any) -> None:
    settings.SSE_MAX_SECONDS = 0.5  # the stream ends by itself, as it does under gunicorn
    session = services.session_create(team=alpha.team)
    first, second, third = (record(alpha, MemoryEvent.Kind.RESET, session, n=n) for n in range(3))
    with stream(
        live_server.url, alpha.key, params={"session": str(session.pk)}, headers={"Last-Event-ID": str(first.pk)}
    ) as response:
        assert response.status_code == 200
        received = [m for m in parse(response.iter_lines()) if isinstance(m, Sse)]
    assert [m.id for m in received] == [second.pk, third.pk]
    # ?after= is the same resume point for clients that cannot set headers; the header wins over it.
    with stream(live_server.url, alpha.key, params={"session": str(session.pk), "after": second.pk}) as response:
        assert [m.id for m in parse(response.iter_lines()) if isinstance(m, Sse)] == [third.pk]
    with stream(
        live_server.url,
        alpha.key,
        params={"session": str(session.pk), "after": first.pk},
        headers={"Last-Event-ID": str(third.pk)},
    ) as response:
        assert [m for m in parse(response.iter_lines()) if isinstance(m, Sse)] == []


def test_a_quiet_stream_sends_heartbeats_and_ends_after_its_lifetime(
    live_server: Any, alpha: Tenant, settings: Any
) -> None:
    settings.SSE_MAX_SECONDS = 0.7
    with stream(live_server.url, alpha.key) as response:
        lines = list(parse(response.iter_lines()))
    assert lines[0].startswith(":")
    assert ": heartbeat" in lines


def test_another_teams_session_is_404_json_before_the_stream_starts(
    live_server: Any, alpha: Tenant, beta: Tenant
) -> None:
    theirs = services.session_create(team=beta.team)
    with stream(live_server.url, alpha.key, params={"session": str(theirs.pk)}) as response:
        response.read()
    assert response.status_code == 404
    assert response.headers["content-type"] == "application/json"
    assert response.json()["error"] == "not_found"


def test_no_key_is_401_and_bad_resume_points_are_400_naming_the_field(live_server: Any, alpha: Tenant) -> None:
    with stream(live_server.url, None) as response:
        response.read()
    assert response.status_code == 401
    assert response.json()["error"] == "not_authenticated"
    with stream(live_server.url, alpha.key, headers={"Last-Event-ID": "abc"}) as response:
        response.read()
    assert response.status_code == 400
    assert "Last-Event-ID" in response.json()["fields"]
    with stream(live_server.url, alpha.key, params={"after": "-1", "session": "nope"}) as response:
        response.read()
    assert response.status_code == 400
    assert set(response.json()["fields"]) == {"after", "session"}


def test_the_schema_documents_the_stream(api: Any) -> None:
    response = api.get("/api/schema/", HTTP_ACCEPT="application/json")
    assert response.status_code == 200
    operation = response.json()["paths"]["/api/v1/events/stream/"]["get"]
    assert "text/event-stream" in operation["responses"]["200"]["content"]


def test_the_cursor_holds_back_events_behind_a_hole_until_it_fills_or_expires(alpha: Tenant, settings: Any) -> None:
    """An id below one already visible may still be committing (PostgreSQL): it must not be skipped."""
    settings.SSE_GAP_GRACE_SECONDS = 3600
    start = record(alpha, MemoryEvent.Kind.RESET)
    hole = record(alpha, MemoryEvent.Kind.RESET, n="deleted: looks like a transaction still in flight")
    after_hole = record(alpha, MemoryEvent.Kind.RESET, n="after")
    MemoryEvent.objects.filter(pk=hole.pk).delete()
    cursor = EventCursor(team=alpha.team, session=None, position=start.pk)
    assert cursor.poll() == []
    assert cursor.poll() == []
    settings.SSE_GAP_GRACE_SECONDS = 0
    assert cursor.poll() == [after_hole]
    assert cursor.poll() == []


def test_a_stream_ends_with_the_id_to_resume_from_and_a_reconnect_misses_nothing(
    live_server: Any, alpha: Tenant, settings: Any
) -> None:
    settings.SSE_MAX_SECONDS = 0.3
    session = services.session_create(team=alpha.team)
    seen = record(alpha, MemoryEvent.Kind.RESET, session, n=1)
    with stream(live_server.url, alpha.key) as response:
        lines = list(response.iter_lines())
    # `id:` without data: EventSource keeps it as Last-Event-ID without firing an event.
    assert lines[-3:] == [f"id: {seen.pk}", f": stream ends; reconnect with Last-Event-ID {seen.pk}", ""]
    missed_while_away = record(alpha, MemoryEvent.Kind.RESET, session, n=2)
    with stream(live_server.url, alpha.key, headers={"Last-Event-ID": lines[-3].removeprefix("id: ")}) as response:
        assert [m.id for m in parse(response.iter_lines()) if isinstance(m, Sse)] == [missed_while_away.pk]


def refused(url: str, key: str) -> httpx.Response:
    """The answer to opening one more stream; a refusal's JSON body is read, an open stream left."""
    with stream(url, key) as response:
        if response.status_code != 200:
            response.read()
    return response


def test_a_key_past_its_stream_cap_is_refused_429_with_retry_after_and_a_slot_frees_when_a_client_leaves(
    live_server: Any, alpha: Tenant, settings: Any
) -> None:
    settings.SSE_MAX_STREAMS_PER_KEY = 2
    settings.SSE_HEARTBEAT_SECONDS = 0.1  # a stream notices its client left at its next write
    first, second = stream(live_server.url, alpha.key), stream(live_server.url, alpha.key)
    for opened in (first, second):
        assert opened.__enter__().status_code == 200
    answer = refused(live_server.url, alpha.key)
    assert answer.status_code == 429
    assert answer.json()["error"] == "too_many_streams"
    assert "MEMSITE_SSE_MAX_STREAMS_PER_KEY" in answer.json()["detail"]
    assert int(answer.headers["Retry-After"]) >= 1
    other_key = make_tenant("stream-alpha-reader", role="read")  # another key is not held back
    assert refused(live_server.url, other_key.key).status_code == 200
    first.__exit__(None, None, None)
    wait_for(lambda: EventStreamLease.objects.filter(api_key=alpha.api_key).count() == 1, timeout=10, what="release")
    with stream(live_server.url, alpha.key) as response:
        assert response.status_code == 200
    second.__exit__(None, None, None)


def test_the_deployment_cap_answers_503_and_a_lapsed_lease_stops_counting(
    live_server: Any, alpha: Tenant, beta: Tenant, settings: Any
) -> None:
    settings.SSE_MAX_STREAMS = 1
    # No heartbeat renews the held stream's lease during the test (a lease lapses after three),
    # so the lease backdated below stays lapsed, as a killed process's would.
    settings.SSE_HEARTBEAT_SECONDS = 600
    with stream(live_server.url, alpha.key) as held:
        assert held.status_code == 200
        answer = refused(live_server.url, beta.key)
        assert answer.status_code == 503
        assert answer.json()["error"] == "streams_unavailable"
        assert answer.headers["Retry-After"]
        assert EventStreamLease.objects.count() == 1  # the refused stream left no lease behind
        # A process killed mid-stream never releases its lease: once unrenewed past the lease
        # time it no longer counts.
        EventStreamLease.objects.update(renewed_at=timezone.now() - timedelta(seconds=3600))
        with stream(live_server.url, beta.key) as response:
            assert response.status_code == 200
