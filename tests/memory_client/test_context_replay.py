"""The client names what each context read served (`context_id` on the list it returns) and
replays it over real HTTP: exactly as served after appends, an edit, a compaction and a revert;
another team's id is NotFoundError."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest

from memory_app.compaction import services as compaction
from memory_app.compaction.models import CompactionRun
from memory_app.conversations.models import Session
from memory_app.usage.models import new_context_id
from memory_client import MemoryManager, NotFoundError
from tests.conftest import make_tenant
from tests.memory_client.test_managed_memory import SYSTEM, add_turns, config


def as_sent(messages: list[dict[str, Any]]) -> bytes:
    return json.dumps(messages, ensure_ascii=False, separators=(",", ":")).encode()


def compact(session_id: str) -> CompactionRun:
    session = Session.objects.get(pk=session_id)
    run, _ = compaction.compaction_request(session=session, trigger=CompactionRun.Trigger.MANUAL)
    assert compaction.compaction_execute(run_id=str(run.pk)) == "done"
    return CompactionRun.objects.get(pk=run.pk)


def test_a_replay_is_what_was_served_after_appends_an_edit_a_compaction_and_a_revert(
    make_memory: Callable[..., MemoryManager],
) -> None:
    memory = make_memory("managed_conversation", SYSTEM, memory_config=config(threshold=100_000))
    ids = add_turns(memory, 4)
    served = memory.get_messages()
    assert served.context_id and served[0] == {"role": "system", "content": SYSTEM}
    sent = as_sent(served)

    def replayed() -> bytes:
        return as_sent(memory.replay_context(served.context_id)["messages"])

    add_turns(memory, 1, start=4)
    assert replayed() == sent
    memory.update(ids[1], content="EDITED after it was served")
    assert memory.get_messages()[2]["content"] == "EDITED after it was served"
    assert replayed() == sent
    run = compact(memory.session_id)
    assert any(str(m["content"]).startswith("[Compacted") for m in memory.get_messages())
    assert replayed() == sent
    compaction.compaction_revert(run=run)
    assert replayed() == sent
    memory.delete_memory(0)
    assert replayed() == sent


def test_each_read_names_its_own_context_and_the_replay_holds_the_read(
    make_memory: Callable[..., MemoryManager],
) -> None:
    memory = make_memory(description="You plan trips")
    memory.add(role="user", content="Find a hotel in Oslo")
    memory.add(role="assistant", content="The fjord hotel has rooms.")

    first, second = memory.context(last=1), memory.context(max_tokens=500)

    assert first.context_id != second.context_id
    replay = memory.replay_context(first.context_id)
    assert replay["params"]["last"] == 1 and replay["params"]["max_tokens"] is None
    assert replay["messages"] == list(first) and replay["token_count"] > 0
    assert replay["next_context_id"] == second.context_id


def test_another_teams_context_id_is_not_found(make_memory: Callable[..., MemoryManager]) -> None:
    memory = make_memory(description="secret plans")
    memory.add(role="user", content="hello")
    served = memory.context()
    stranger = make_memory(description="mine", api_key=make_tenant("client-beta").key)

    with pytest.raises(NotFoundError) as refused:
        stranger.replay_context(served.context_id)

    assert refused.value.error == "not_found" and "secret" not in str(refused.value)
    assert memory.replay_context(served.context_id)["messages"] == list(served)


def test_a_context_not_recorded_yet_is_waited_for_then_not_found(
    make_memory: Callable[..., MemoryManager], settings: Any
) -> None:
    # An id as young as one another web process may still hold: the client asks again, briefly.
    settings.CONTEXT_LEDGER_FLUSH_SECONDS = 3600
    memory = make_memory(description="You plan trips")
    started = time.monotonic()

    with pytest.raises(NotFoundError) as refused:
        memory.replay_context(str(new_context_id()), wait=1.0)

    assert refused.value.error == "not_recorded_yet"
    assert time.monotonic() - started >= 1.0  # it waited (the client's `wait`) before giving up
