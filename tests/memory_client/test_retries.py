"""Retries happen only where they are safe: reads, message appends (client ids), unsent requests."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import httpx
import pytest

from memory_app.conversations.models import Message as MessageRow
from memory_app.conversations.models import Session
from memory_client import ApiError


class FlakyTransport(httpx.HTTPTransport):
    """Real HTTP, except that chosen requests fail once in a chosen way.

    `fail(request)` returns "lose_response" (send it, then drop the answer: the server did
    the work), "refuse" (connection refused: never sent), "unavailable" (a 503 from a proxy
    in front of the server: never reached it) or None.
    """

    def __init__(self, fail: Callable[[httpx.Request], str | None]) -> None:
        super().__init__()
        self.fail = fail
        self.sent: list[str] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(request.method)
        mode = self.fail(request)
        if mode == "refuse":
            raise httpx.ConnectError("refused", request=request)
        if mode == "unavailable":
            return httpx.Response(503, headers={"Retry-After": "0"}, json={"error": "unavailable"}, request=request)
        response = super().handle_request(request)
        if mode == "lose_response":
            response.read()
            response.close()
            raise httpx.ReadTimeout("response lost", request=request)
        return response


def once(method: str, suffix: str, mode: str) -> Callable[[httpx.Request], str | None]:
    """Fail the first `method` request whose path ends with `suffix`, in `mode`."""
    done = []

    def fail(request: httpx.Request) -> str | None:
        if request.method == method and request.url.path.endswith(suffix) and not done:
            done.append(True)
            return mode
        return None

    return fail


def test_a_lost_append_response_is_retried_without_duplicating_the_message(make_memory):
    transport = FlakyTransport(once("POST", "/messages/", "lose_response"))
    memory = make_memory(transport=transport)

    message_id = memory.add(role="user", content="exactly once")

    assert transport.sent.count("POST") == 3  # create session, append, retried append
    rows = list(MessageRow.objects.filter(session_id=memory.session_id).values_list("pk", "content"))
    assert [(str(pk), content) for pk, content in rows] == [(message_id, "exactly once")]
    assert memory.retrieve_all() == [{"role": "user", "content": "exactly once"}]


def test_a_batch_retried_after_a_lost_response_is_stored_once(make_memory, tmp_path):
    source = make_memory(description="sys")
    for i in range(3):
        source.add(role="user", content=f"m{i}")
    source.save_to_file(str(tmp_path / "saved.json"))

    transport = FlakyTransport(once("POST", "/messages/", "lose_response"))
    target = make_memory(transport=transport)
    target.load_from_file(str(tmp_path / "saved.json"))

    assert [m["content"] for m in target.retrieve_all()] == ["sys", "m0", "m1", "m2"]
    assert MessageRow.objects.filter(session_id=target.session_id).count() == 3


def test_reads_are_retried_after_a_503(make_memory):
    transport = FlakyTransport(once("GET", "/export/", "unavailable"))
    memory = make_memory(description="sys", transport=transport)
    assert memory.retrieve_all() == [{"role": "system", "content": "sys"}]
    assert transport.sent.count("GET") == 2


def test_a_delete_whose_response_was_lost_is_not_retried(make_memory):
    transport = FlakyTransport(once("DELETE", "/", "lose_response"))
    memory = make_memory(transport=transport)
    message_id = memory.add(role="user", content="x")

    # A blind retry would get 404 and wrongly report "not removed"; the caller is told instead.
    with pytest.raises(ApiError) as error:
        memory.remove_by_id(message_id)
    assert (error.value.status_code, error.value.error) == (None, "transport")
    assert transport.sent.count("DELETE") == 1
    assert not MessageRow.objects.filter(pk=message_id).exists()


def test_a_patch_whose_response_was_lost_is_not_retried(make_memory):
    transport = FlakyTransport(once("PATCH", "/", "lose_response"))
    memory = make_memory(transport=transport)
    message_id = memory.add(role="user", content="x")
    with pytest.raises(ApiError):
        memory.update(message_id, content="y")
    assert transport.sent.count("PATCH") == 1


def test_a_session_create_that_was_never_sent_is_retried(make_memory):
    transport = FlakyTransport(once("POST", "/sessions/", "refuse"))
    memory = make_memory(transport=transport)
    assert transport.sent.count("POST") == 2
    assert memory.retrieve_all() == []


def test_retries_stop_after_max_retries(make_memory):
    transport = FlakyTransport(lambda request: "unavailable" if request.method == "GET" else None)
    memory = make_memory(transport=transport, max_retries=2)
    with pytest.raises(ApiError) as error:
        memory.retrieve_all()
    assert error.value.status_code == 503
    assert transport.sent.count("GET") == 3


class KeyRecordingTransport(FlakyTransport):
    def __init__(self, fail: Callable[[httpx.Request], str | None]) -> None:
        super().__init__(fail)
        self.keys: list[tuple[str, str | None]] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.keys.append((request.url.path, request.headers.get("Idempotency-Key")))
        return super().handle_request(request)


def test_a_session_create_whose_response_was_lost_is_retried_with_its_key_and_creates_one_session(
    make_memory, client_tenant
):

    transport = KeyRecordingTransport(once("POST", "/sessions/", "lose_response"))
    memory = make_memory(transport=transport)

    creates = [key for path, key in transport.keys if path.endswith("/sessions/")]
    assert len(creates) == 2 and creates[0] is not None and creates[0] == creates[1]
    assert list(Session.objects.filter(team=client_tenant.team).values_list("pk", flat=True)) == [
        uuid.UUID(memory.session_id)
    ]


def test_each_append_gets_its_own_key_and_a_retry_reuses_it(make_memory):
    transport = KeyRecordingTransport(once("POST", "/messages/", "unavailable"))
    memory = make_memory(transport=transport)
    memory.add(role="user", content="one")
    memory.add(role="user", content="two")

    appends = [key for path, key in transport.keys if path.endswith("/messages/")]
    assert len(appends) == 3  # the first append was answered 503 once, then retried
    assert appends[0] == appends[1] != appends[2]
    assert [m["content"] for m in memory.retrieve_all()] == ["one", "two"]
