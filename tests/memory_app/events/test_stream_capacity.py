"""Event streams served by gunicorn as `make run` starts it: held streams never take the threads
that serve the API, and streams past the deployment's cap are refused."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import httpx
import pytest

from memory_app.conversations import services
from memory_app.tenancy import services as tenancy
from memory_app.tenancy.models import ApiKey
from tests.conftest import make_tenant
from tests.memory_app.events.test_stream import stream
from tests.worker_process import process_env, start_gunicorn, stop

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

STREAMS = 20  # MEMSITE_SSE_MAX_STREAMS's default


@pytest.fixture
def server() -> Iterator[str]:
    # Heartbeats every second, so the held streams really write while the API is called.
    process, url = start_gunicorn(process_env({"MEMSITE_SSE_HEARTBEAT_SECONDS": "1"}))
    try:
        yield url
    finally:
        stop(process)


def read_keys(team: Any, count: int) -> list[str]:
    return [tenancy.api_key_create(team=team, name=f"reader-{n}", role=ApiKey.Role.READ)[1] for n in range(count)]


def test_twenty_held_streams_leave_the_api_answering_within_a_second_and_the_next_is_refused(
    server: str,
) -> None:
    writer = make_tenant("many-streams")
    readers = read_keys(writer.team, STREAMS + 1)
    session = services.session_create(team=writer.team)
    with ExitStack() as held:
        opened = [held.enter_context(stream(server, key)) for key in readers[:STREAMS]]
        assert [response.status_code for response in opened] == [200] * STREAMS
        lines = [response.iter_lines() for response in opened]
        assert all(next(each) == "retry: 1000" for each in lines)  # every stream is really open

        for turn in range(3):
            assert httpx.get(f"{server}/healthz", timeout=1.0).status_code == 200
            appended = httpx.post(
                f"{server}/api/v1/sessions/{session.pk}/messages/",
                json={"role": "user", "content": f"still answering, turn {turn}"},
                headers={"Authorization": f"Bearer {writer.key}"},
                timeout=1.0,
            )
            assert appended.status_code == 201, appended.text

        with stream(server, readers[STREAMS]) as refused:
            refused.read()
        assert refused.status_code == 503
        assert refused.json()["error"] == "streams_unavailable"
        assert int(refused.headers["Retry-After"]) >= 1
        # The held streams keep beating while refused callers wait.
        assert ": heartbeat" in (next(lines[0]) for _ in range(10))
