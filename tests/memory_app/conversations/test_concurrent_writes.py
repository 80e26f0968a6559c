"""Many agents writing into one session at once: seq stays gap-free, unique and ordered."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from memory_app.conversations.models import Message
from tests.conftest import make_tenant

WRITERS = 50
RESENDS = 3


def send_until_answered(client: httpx.Client, url: str, body: dict) -> int:
    for attempt in range(RESENDS + 1):
        try:
            return client.post(url, json=body).status_code
        except httpx.TransportError:
            if attempt == RESENDS:
                raise
    raise AssertionError("unreachable")


MESSAGES_PER_WRITER = 40


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_concurrent_writers_get_gap_free_seqs_in_their_own_order(live_server):
    tenant = make_tenant("concurrency")
    headers = {"Authorization": f"Bearer {tenant.key}"}
    session_id = httpx.post(f"{live_server.url}/api/v1/sessions/", json={}, headers=headers).json()["id"]
    url = f"{live_server.url}/api/v1/sessions/{session_id}/messages/"

    def writer(index: int) -> list[int]:
        statuses = []
        with httpx.Client(headers=headers, timeout=60) as client:
            for i in range(MESSAGES_PER_WRITER):
                # As the client library does: a message_id of its own, so a write whose connection
                # the busy test server reset can be sent again without being stored twice.
                body = {
                    "message_id": str(uuid.uuid5(uuid.NAMESPACE_OID, f"w{index}-{i}")),
                    "role": "user",
                    "content": f"w{index}-{i}",
                }
                statuses.append(send_until_answered(client, url, body))
        return statuses

    with ThreadPoolExecutor(max_workers=WRITERS) as pool:
        statuses = [code for codes in pool.map(writer, range(WRITERS)) for code in codes]

    # 200: a resent message the server had stored before the connection broke, returned as stored.
    assert set(statuses) <= {200, 201} and len(statuses) == WRITERS * MESSAGES_PER_WRITER, sorted(set(statuses))
    rows = list(Message.objects.filter(session_id=session_id).order_by("seq").values_list("seq", "content"))
    assert [seq for seq, _ in rows] == list(range(1, WRITERS * MESSAGES_PER_WRITER + 1))
    for index in range(WRITERS):
        own = [int(content.split("-")[1]) for _, content in rows if content.startswith(f"w{index}-")]
        assert own == list(range(MESSAGES_PER_WRITER))


@pytest.mark.django_db(transaction=True)
def test_one_message_id_sent_with_ten_contents_at_once_stores_one_and_refuses_the_others(live_server):
    tenant = make_tenant("same-id")
    headers = {"Authorization": f"Bearer {tenant.key}"}
    session_id = httpx.post(f"{live_server.url}/api/v1/sessions/", json={}, headers=headers).json()["id"]
    url = f"{live_server.url}/api/v1/sessions/{session_id}/messages/"
    chosen = "9a3c6f2e-5b1d-4e8a-9c7f-2d4b6a8e0c13"

    def writer(index: int) -> tuple[int, str]:
        body = {"message_id": chosen, "role": "user", "content": f"version {index}"}
        response = httpx.post(url, json=body, headers=headers, timeout=60)
        return response.status_code, f"version {index}"

    with ThreadPoolExecutor(max_workers=10) as pool:
        answers = list(pool.map(writer, range(10)))

    stored = Message.objects.get(pk=chosen).content
    assert sorted(code for code, _ in answers) == [201] + [422] * 9
    assert [content for code, content in answers if code == 201] == [stored]
    # The same content again is a replay of the stored message, not a new one.
    again = httpx.post(url, json={"message_id": chosen, "role": "user", "content": stored}, headers=headers)
    assert again.status_code == 200
    assert Message.objects.filter(session_id=session_id).count() == 1
