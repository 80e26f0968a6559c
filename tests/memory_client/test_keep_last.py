"""Keeping only the last N messages: `last_messages` (pure) and `keep_last` (on the server).

The recipe "reset, then re-add `retrieve_recent(...)[-N:]`" breaks when the slice starts with
a tool result: the server refuses a tool message whose call is not stored (OpenAI refuses
such a request too). Both helpers move the cut back to the assistant message that made the
call, so a user asking for N messages may keep a few more, never a broken turn.
"""

from __future__ import annotations

import pytest

from memory_app.conversations.models import Message as MessageRow
from memory_client import Memory, Message, MessageError, Post, last_messages
from memory_client.vocabulary.messages import MESSAGE_FIELDS
from tests.memory_client.conftest import PNG_DATA_URL


def call(call_id: str, name: str = "ls") -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}


def user(text: str) -> dict:
    return {"role": "user", "content": text}


def assistant(text: str | None, *call_ids: str) -> dict:
    message: dict = {"role": "assistant", "content": text}
    if call_ids:
        message["tool_calls"] = [call(call_id) for call_id in call_ids]
    return message


def tool(call_id: str, text: str) -> dict:
    return {"role": "tool", "content": text, "tool_call_id": call_id}


TOOL_TURN = [
    user("count the files"),
    assistant(None, "call_1", "call_2"),
    tool("call_1", "a.txt"),
    tool("call_2", "b.txt"),
    assistant("Two files."),
]


# --- last_messages: the cut, on lists -----------------------------------------------------


def test_last_messages_is_the_plain_tail_without_tool_turns():
    history = [user("1"), assistant("2"), user("3"), assistant("4")]
    assert last_messages(history, 2) == history[2:]
    assert last_messages(history, 10) == history
    assert last_messages(history, 0) == []
    assert last_messages([], 3) == []


def test_last_messages_moves_the_cut_back_to_the_assistant_message_that_made_the_calls():
    assert last_messages(TOOL_TURN, 2) == TOOL_TURN[1:]
    assert last_messages(TOOL_TURN, 3) == TOOL_TURN[1:]
    assert last_messages(TOOL_TURN, 4) == TOOL_TURN[1:]
    assert last_messages(TOOL_TURN, 1) == TOOL_TURN[4:]


def test_last_messages_follows_a_chain_of_interleaved_turns():
    history = [
        user("go"),
        assistant(None, "call_a"),
        assistant(None, "call_b"),
        tool("call_b", "b"),
        tool("call_a", "a"),
        user("next"),
    ]
    # call_a's result pulls in its call, and with it everything between: call_b's turn too.
    assert last_messages(history, 2) == history[1:]


def test_last_messages_pairs_a_reused_call_id_with_the_latest_call_before_it():
    history = [
        assistant(None, "call_0"),
        tool("call_0", "first"),
        user("again"),
        assistant(None, "call_0"),
        tool("call_0", "second"),
    ]
    assert last_messages(history, 1) == history[3:]


def test_last_messages_drops_a_tool_result_whose_call_is_not_in_the_list():
    # What retrieve_recent(n) returns can start with such a result: there is nothing to move back to.
    history = [tool("call_1", "a.txt"), tool("call_2", "b.txt"), assistant("Two files."), user("thanks")]
    assert last_messages(history, 4) == history[2:]
    assert last_messages(history, 3) == history[2:]


def test_last_messages_keeps_a_call_whose_results_are_still_to_come():
    history = [user("list"), assistant(None, "call_1")]
    assert last_messages(history, 1) == history[1:]


def test_last_messages_takes_message_objects_and_llm_dicts_alike():
    messages = [Message.from_dict(m) for m in TOOL_TURN]
    assert last_messages(messages, 2) == messages[1:]
    llm_dicts = [m.to_llm_dict() for m in messages]
    assert last_messages(llm_dicts, 2) == llm_dicts[1:]


def test_last_messages_refuses_a_negative_count():
    with pytest.raises(ValueError):
        last_messages(TOOL_TURN, -1)


# --- keep_last: the same cut, applied to a session ----------------------------------------


def stored(session_id: str) -> dict[str, dict]:
    """Every stored field of the session's messages but their position, by message id."""
    rows = MessageRow.objects.filter(session_id=session_id).order_by("seq")
    return {str(row["id"]): row for row in rows.values("id", *MESSAGE_FIELDS, "token_count")}


def add_all(memory, messages: list[dict]) -> list[str]:
    return [memory.add(**message) for message in messages]


def test_the_reset_and_re_add_recipe_is_refused_when_the_slice_starts_with_a_tool_result(make_memory):
    memory = make_memory(description="You are helpful")
    add_all(memory, TOOL_TURN)
    recent = memory.retrieve_recent(100)
    memory.reset_memory()
    with pytest.raises(MessageError) as refused:
        for message in recent[-3:]:  # tool, tool, assistant
            memory.add(message=Message(**message))
    assert "tool_call_id" in refused.value.fields


def test_keep_last_keeps_the_prompt_and_the_last_n_messages_under_their_ids(make_memory):
    memory = make_memory(description="You are helpful")
    ids = add_all(memory, [user("1"), assistant("2"), user("3"), assistant("4"), user("5")])

    assert memory.keep_last(2) == ids[3:]

    assert memory.retrieve_all() == [{"role": "system", "content": "You are helpful"}, assistant("4"), user("5")]
    assert memory.retrieve_by_id(ids[4]) == user("5")
    assert memory.retrieve_by_id(ids[0]) is None
    rows = MessageRow.objects.filter(session_id=memory.session_id).order_by("seq")
    assert [str(pk) for pk in rows.values_list("pk", flat=True)] == ids[3:]


def test_keep_last_moves_the_cut_back_to_the_tool_call_its_results_answer(make_memory):
    memory = make_memory(description="You are helpful")
    ids = add_all(memory, TOOL_TURN)

    assert memory.keep_last(2) == ids[1:]

    assert memory.retrieve_all()[1:] == [
        {"role": "assistant", "content": None, "tool_calls": [call("call_1"), call("call_2")]},
        tool("call_1", "a.txt"),
        tool("call_2", "b.txt"),
        assistant("Two files."),
    ]


def test_keep_last_reads_further_back_when_the_call_is_older_than_the_window(make_memory):
    memory = make_memory()
    calls = [f"call_{index}" for index in range(8)]
    ids = add_all(memory, [user("read them all"), assistant(None, *calls), *(tool(c, c) for c in calls)])

    assert memory.keep_last(3) == ids[1:]
    assert [m["role"] for m in memory.retrieve_all()] == ["assistant"] + ["tool"] * 8


def test_keep_last_keeps_every_stored_field(make_memory, png_path):
    memory = make_memory(description="You are helpful")
    add_all(memory, [user("old"), user("older")])
    kept = [
        Message(role="user", content="look", name="alice", images=[str(png_path)]),
        Message(
            role="assistant",
            content={"plan": "ls"},
            tool_calls=[call("call_1")],
            agent_calls=[{"agent_name": "B", "request": {"q": 1}}],
            structured_data={"ok": True},
            reasoning_details=[{"signature": "s"}],
        ),
        Message(role="tool", content="a.txt", tool_call_id="call_1", name="ls"),
    ]
    for message in kept:
        memory.add(message)
    MessageRow.objects.filter(pk=kept[0].message_id).update(send_from="User", send_to="Planner", meta={"k": 1})
    before = stored(memory.session_id)

    memory.keep_last(3)

    after = stored(memory.session_id)
    assert list(after) == [m.message_id for m in kept]
    assert after == {m.message_id: before[m.message_id] for m in kept}
    assert after[kept[0].message_id]["images"] == [PNG_DATA_URL]
    assert after[kept[0].message_id]["meta"] == {"k": 1}


def test_keep_last_changes_nothing_when_every_message_fits(make_memory, bus):
    memory = make_memory(description="You are helpful")
    ids = add_all(memory, TOOL_TURN)
    memory.set_event_context("agent-a", bus)

    assert memory.keep_last(len(TOOL_TURN)) == ids
    assert memory.keep_last(100) == ids

    assert bus.of_type("MemoryResetEvent") == []
    assert list(MessageRow.objects.filter(session_id=memory.session_id).values_list("seq", flat=True)) == [
        1,
        2,
        3,
        4,
        5,
    ]


def test_keep_last_resets_once_and_says_so_like_the_recipe(make_memory, bus):
    memory = make_memory(description="You are helpful")
    add_all(memory, [user("1"), assistant("2"), user("3")])
    memory.set_event_context("agent-a", bus)

    memory.keep_last(1)

    assert [event.agent_name for event in bus.of_type("MemoryResetEvent")] == ["agent-a"]


def test_keep_last_zero_keeps_only_the_prompt(make_memory):
    memory = make_memory(description="You are helpful")
    add_all(memory, TOOL_TURN)
    assert memory.keep_last(0) == []
    assert memory.retrieve_all() == [{"role": "system", "content": "You are helpful"}]


def test_keep_last_keeps_a_leading_system_message_as_reset_memory_does(make_memory):
    memory = make_memory()  # no prompt on the session: marsys's index 0 is this message
    ids = add_all(memory, [{"role": "system", "content": "set later"}, user("1"), assistant("2"), user("3")])

    assert memory.keep_last(1) == [ids[0], ids[3]]
    assert memory.retrieve_all() == [{"role": "system", "content": "set later"}, user("3")]


def test_keep_last_refuses_a_negative_count(make_memory):
    memory = make_memory()
    memory.add(role="user", content="stays")
    with pytest.raises(ValueError):
        memory.keep_last(-1)
    assert memory.retrieve_all() == [user("stays")]


def test_keep_last_on_managed_memory_trims_the_raw_history(make_memory):
    memory = make_memory(memory_type="managed_conversation", description="You are helpful")
    ids = add_all(memory, [user("old question"), *TOOL_TURN])

    assert memory.keep_last(3) == ids[2:]

    assert [m.message_id for m in memory.get_raw_messages()] == ids[2:]
    assert memory.get_messages()[0] == {"role": "system", "content": "You are helpful"}


def test_keep_last_stores_kept_round_posts_back_as_plain_messages(make_memory, server_url, client_tenant):
    memory = make_memory(description="You are helpful")
    memory.add(role="user", content="before the round")
    with Memory(memory.session_id, base_url=server_url, api_key=client_tenant.key) as rounds:
        round_ = rounds.create_round("count the rows")
        rounds.add_post(round_.id, Post.create("count the rows", "User", "Planner"))
        rounds.add_post(round_.id, Post.create("42 rows", "Planner", "User"))

        memory.keep_last(2)

        assert [m["content"] for m in memory.retrieve_all()[1:]] == ["count the rows", "42 rows"]
        assert [m["send_from"] for m in stored(memory.session_id).values()] == ["User", "Planner"]
        assert [len(r.post_list) for r in rounds.get_rounds()] == [0]


def test_kg_memory_has_no_keep_last(make_memory):
    with pytest.raises(NotImplementedError):
        make_memory(memory_type="kg").keep_last(1)
