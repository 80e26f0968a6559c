"""Many agents writing into one session at once: seq stays gap-free, unique and ordered."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from memory_app.models import Message
from tests.conftest import make_tenant

WRITERS = 50
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
                response = client.post(url, json={"role": "user", "content": f"w{index}-{i}"})
                statuses.append(response.status_code)
        return statuses

    with ThreadPoolExecutor(max_workers=WRITERS) as pool:
        statuses = [code for codes in pool.map(writer, range(WRITERS)) for code in codes]

    assert statuses.count(201) == WRITERS * MESSAGES_PER_WRITER, sorted(set(statuses))
    rows = list(Message.objects.filter(session_id=session_id).order_by("seq").values_list("seq", "content"))
    assert [seq for seq, _ in rows] == list(range(1, WRITERS * MESSAGES_PER_WRITER + 1))
    for index in range(WRITERS):
        own = [int(content.split("-")[1]) for _, content in rows if content.startswith(f"w{index}-")]
        assert own == list(range(MESSAGES_PER_WRITER))
