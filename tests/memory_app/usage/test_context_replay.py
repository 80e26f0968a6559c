"""GET /api/v1/contexts/{context_id}/: a served context replayed exactly as it was served,
whatever happened to its session since; scoped to the team; kept MEMSITE_CONTEXT_RECORD_DAYS."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.renderers import JSONRenderer
from rest_framework.test import APIClient

from memory_app.compaction import services as compaction
from memory_app.compaction.models import CompactionRun
from memory_app.conversations import services
from memory_app.conversations.models import MemoryType, Message, Session
from memory_app.models import ContextRecord, ContextServe
from memory_app.usage import context_ledger, selectors
from memory_app.usage import services as usage_services
from memory_app.usage.models import new_context_id
from tests.memory_app.search.test_indexing import run_index
from tests.memory_app.usage.test_served_contexts import SYSTEM_PROMPT, compacted_session, turns

pytestmark = pytest.mark.usefixtures("job_outbox")


def read(api: APIClient, session: Session, **params: Any) -> tuple[dict[str, Any], bytes]:
    response = api.get(f"/api/v1/sessions/{session.pk}/context/", params)
    assert response.status_code == 200, response.content
    return response.json(), response.content


def replay(api: APIClient, context_id: str) -> tuple[dict[str, Any], bytes]:
    response = api.get(f"/api/v1/contexts/{context_id}/")
    assert response.status_code == 200, response.content
    return response.json(), response.content


def messages_bytes(answer: dict[str, Any], raw: bytes) -> bytes:
    """The `messages` array exactly as it appears in the raw answer."""
    rendered = JSONRenderer().render(answer["messages"])
    assert b'"messages":' + rendered in raw  # the renderer is deterministic: these are the answer's bytes
    return rendered


def test_the_replay_is_byte_identical_after_appends_an_edit_a_compaction_and_a_revert(api, admin_api, tenant) -> None:
    session = services.session_create(
        team=tenant.team,
        external_id="oslo",
        system_prompt=SYSTEM_PROMPT,
        memory_type=MemoryType.MANAGED_CONVERSATION,
        memory_config={"threshold_tokens": 100_000},
    )
    services.message_append(session=session, messages=turns(1, 3))
    served, raw = read(api, session)
    sent = messages_bytes(served, raw)
    edited = Message.objects.get(session=session, seq=2)

    def assert_replayed_as_served(after: str) -> None:
        body, replay_raw = replay(api, served["context_id"])
        assert b'"messages":' + sent in replay_raw, after
        assert body["messages"] == served["messages"], after

    services.message_append(session=session, messages=turns(4, 1))
    assert_replayed_as_served("an append")
    patched = api.patch(f"/api/v1/sessions/{session.pk}/messages/{edited.pk}/", {"content": "EDITED"}, format="json")
    assert patched.status_code == 200
    assert read(api, session)[0]["messages"][2]["content"] == "EDITED"  # the live context did change
    assert_replayed_as_served("an edit")
    run, _ = compaction.compaction_request(session=session, trigger=CompactionRun.Trigger.MANUAL)
    assert compaction.compaction_execute(run_id=str(run.pk)) == "done"
    assert any("[Compacted" in str(m["content"]) for m in read(api, session)[0]["messages"])
    assert_replayed_as_served("a compaction")
    reverted = admin_api.post(f"/api/v1/sessions/{session.pk}/compactions/{run.pk}/revert/")
    assert reverted.status_code == 200, reverted.content
    assert_replayed_as_served("a revert")
    services.message_delete(message=Message.objects.get(session=session, seq=1))
    assert_replayed_as_served("a deletion")


def test_the_replay_holds_the_read_its_summary_and_its_tokens_by_part(api, tenant) -> None:
    session = compacted_session(tenant)  # 12 messages, the first ones summarised
    served, _ = read(api, session, max_tokens=5000)

    body, _ = replay(api, served["context_id"])

    serve = ContextServe.objects.get(context_id=served["context_id"])
    assert body["params"] == {"last": None, "max_tokens": 5000, "recall": None, "recall_k": None, "recall_kinds": None}
    assert body["token_count"] == served["token_count"] == sum(body["breakdown"].values())
    assert body["breakdown"]["summary"] == serve.summary_tokens > 0
    assert body["raw_tokens"] == serve.raw_tokens
    run = CompactionRun.objects.get(session=session, status="done")
    assert body["summary"]["run_id"] == str(run.pk) and body["summary"]["covered_to_seq"] == run.covered_to_seq
    kinds = [part["kind"] for part in body["parts"]]
    summary = [m for m, kind in zip(body["messages"], kinds, strict=True) if kind in ("summary", "instruction")]
    assert body["summary"]["messages"] == summary and "[Compacted" in str(summary)
    assert kinds[0] == "system" and "summary" in kinds
    assert [p["seq"] for p in body["parts"] if p["kind"] == "message"] == list(range(run.covered_to_seq + 1, 13))
    assert body["session_id"] == str(session.pk) and body["recall"] is None


def test_the_replay_names_the_recalled_memories_with_their_text_and_scores(api, tenant) -> None:
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
    services.message_append(session=session, messages=turns(1, 1))
    served, _ = read(api, session, recall="kestrel migration disk", recall_k=2)

    body, _ = replay(api, served["context_id"])

    assert body["params"]["recall"] == "kestrel migration disk" and body["params"]["recall_k"] == 2
    memories = body["recall"]["memories"]
    assert [{k: v for k, v in m.items() if k != "text"} for m in memories] == served["recall"]["memories"]
    assert any("disk quota was full" in m["text"] for m in memories)
    assert all(m["score"] > 0 for m in memories)
    assert body["messages"][1]["content"] == served["messages"][1]["content"]  # the recall message as sent


def test_another_teams_context_id_is_a_404(api, tenant, other_tenant) -> None:
    session = services.session_create(team=tenant.team, system_prompt="secret plans")
    services.message_append(session=session, messages=turns(1, 1))
    served, _ = read(api, session)

    response = other_tenant.client.get(f"/api/v1/contexts/{served['context_id']}/")

    assert response.status_code == 404
    assert response.json()["error"] == "not_found" and b"secret" not in response.content
    assert api.get(f"/api/v1/contexts/{uuid.uuid4()}/").status_code == 404


def test_neighbours_link_the_sessions_served_contexts_in_order(api, tenant) -> None:
    session = services.session_create(team=tenant.team, system_prompt=SYSTEM_PROMPT)
    services.message_append(session=session, messages=turns(1, 1))
    ids = [read(api, session)[0]["context_id"] for _ in range(3)]

    middle, _ = replay(api, ids[1])

    assert (middle["previous_context_id"], middle["next_context_id"]) == (ids[0], ids[2])
    assert replay(api, ids[0])[0]["previous_context_id"] is None
    assert replay(api, ids[2])[0]["next_context_id"] is None


@pytest.fixture
def batched(settings) -> Any:
    settings.CONTEXT_LEDGER_FLUSH_SECONDS = 3600
    yield
    context_ledger.flush()  # nothing held leaks into the next test


def test_a_replay_asked_before_its_batch_is_written_writes_it_first(api, tenant, batched) -> None:
    session = services.session_create(team=tenant.team, system_prompt=SYSTEM_PROMPT)
    services.message_append(session=session, messages=turns(1, 1))
    served, raw = read(api, session)
    assert not ContextRecord.objects.exists() and context_ledger.pending() == 1

    _, replay_raw = replay(api, served["context_id"])

    assert b'"messages":' + messages_bytes(served, raw) in replay_raw
    assert context_ledger.pending() == 0 and ContextServe.objects.filter(context_id=served["context_id"]).exists()


def test_a_context_id_another_process_may_still_hold_answers_404_with_retry_after(api, batched) -> None:
    # Served a moment ago by another web process, whose batch is not written yet: ask again.
    response = api.get(f"/api/v1/contexts/{new_context_id()}/")

    assert response.status_code == 404
    assert response.json()["error"] == "not_recorded_yet" and response["Retry-After"] == "3600"


def test_an_old_unknown_context_id_is_simply_not_found(api, batched) -> None:
    old = uuid.UUID(int=new_context_id().int - (3_600_000 << 80) * 2)  # two hours earlier
    response = api.get(f"/api/v1/contexts/{old}/")

    assert response.status_code == 404 and response.json()["error"] == "not_found"
    assert "Retry-After" not in response


def test_records_past_the_retention_are_purged_and_the_ledger_rows_stay(api, tenant, settings) -> None:
    settings.CONTEXT_RECORD_DAYS = 7
    session = services.session_create(team=tenant.team, system_prompt=SYSTEM_PROMPT)
    services.message_append(session=session, messages=turns(1, 1))
    old, recent = read(api, session)[0]["context_id"], read(api, session)[0]["context_id"]
    ContextRecord.objects.filter(pk=old).update(created_at=timezone.now() - timedelta(days=7, minutes=1))

    assert usage_services.context_records_purge() == 1

    assert api.get(f"/api/v1/contexts/{old}/").status_code == 404
    assert replay(api, recent)[0]["context_id"] == recent
    assert ContextServe.objects.filter(session=session).count() == 2  # the usage figures keep both


def test_a_retention_of_zero_keeps_no_records(api, tenant, settings) -> None:
    settings.CONTEXT_RECORD_DAYS = 0
    session = services.session_create(team=tenant.team, system_prompt=SYSTEM_PROMPT)
    services.message_append(session=session, messages=turns(1, 1))

    served, _ = read(api, session)

    assert not ContextRecord.objects.exists() and ContextServe.objects.get().context_id == uuid.UUID(
        served["context_id"]
    )
    assert api.get(f"/api/v1/contexts/{served['context_id']}/").status_code == 404


def test_deleting_the_session_deletes_its_records(api, admin_api, tenant) -> None:
    session = services.session_create(team=tenant.team, system_prompt=SYSTEM_PROMPT)
    served, _ = read(api, session)

    assert admin_api.delete(f"/api/v1/sessions/{session.pk}/").status_code == 204

    assert not ContextRecord.objects.exists()
    assert api.get(f"/api/v1/contexts/{served['context_id']}/").status_code == 404


def test_the_diff_names_what_the_next_context_added_dropped_and_changed(api, tenant) -> None:
    session = services.session_create(team=tenant.team, system_prompt=SYSTEM_PROMPT)
    services.message_append(session=session, messages=turns(1, 2))  # seq 1-4
    first = read(api, session, last=3)[0]["context_id"]  # the system prompt and seq 2, 3, 4
    services.message_update(message=Message.objects.get(session=session, seq=4), data={"content": "changed words"})
    services.message_append(session=session, messages=turns(3, 1))  # seq 5, 6
    second = read(api, session, last=3)[0]["context_id"]  # the system prompt and seq 4, 5, 6

    diff = selectors.context_diff(ContextRecord.objects.get(pk=first).body, ContextRecord.objects.get(pk=second).body)

    assert [line.seq for line in diff.dropped] == [2, 3]
    assert [line.seq for line in diff.added] == [5, 6]
    [changed] = diff.changed
    assert changed.seq == 4 and changed.before is not None and changed.after is not None
    assert changed.before["content"].startswith("answer 2:") and changed.after["content"] == "changed words"
    assert diff.same == 1  # the system prompt
