"""Every MemoryManager method, end to end over real HTTP against the live server."""

from __future__ import annotations

import uuid

import pytest

from memory_app.conversations.models import Message as MessageRow
from memory_app.conversations.models import Session
from memory_client import AgentCallMsg, ConversationMemory, Message, MessageError, ToolCallMsg
from tests.memory_client.conftest import PNG_DATA_URL

CALL = {"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": '{"path": "."}'}}


def test_a_new_manager_creates_a_session_whose_prompt_is_index_0(make_memory, client_tenant):
    memory = make_memory(description="You are helpful", external_id="run-1", metadata={"agent": "a"})

    session = Session.objects.get(pk=memory.session_id)
    assert (session.team, session.system_prompt, session.external_id) == (
        client_tenant.team,
        "You are helpful",
        "run-1",
    )
    assert session.metadata == {"agent": "a"}
    assert memory.retrieve_all() == [{"role": "system", "content": "You are helpful"}]
    assert isinstance(memory.memory_module, ConversationMemory)
    assert memory.memory_type == "conversation_history"


def test_without_description_there_is_no_system_entry(make_memory):
    memory = make_memory()
    memory.add(role="user", content="hi")
    assert memory.retrieve_all() == [{"role": "user", "content": "hi"}]


def test_a_manager_with_session_id_attaches_to_the_existing_session(make_memory):
    first = make_memory(description="shared prompt")
    first.add(role="user", content="from agent one")

    second = make_memory(session_id=first.session_id)
    second.add(role="assistant", content="from agent two")

    expected = [
        {"role": "system", "content": "shared prompt"},
        {"role": "user", "content": "from agent one"},
        {"role": "assistant", "content": "from agent two"},
    ]
    assert first.retrieve_all() == expected == second.retrieve_all()


def test_attaching_with_a_different_description_replaces_the_prompt(make_memory):
    first = make_memory(description="old prompt")
    make_memory(session_id=first.session_id, description="new prompt")
    assert first.retrieve_all() == [{"role": "system", "content": "new prompt"}]


def test_url_and_key_come_from_the_environment(monkeypatch, server_url, client_tenant):
    monkeypatch.setenv("MEMSITE_URL", server_url + "/api/v1/")
    monkeypatch.setenv("MEMSITE_API_KEY", client_tenant.key)
    with ConversationMemory(description="env") as memory:
        memory.add(role="user", content="hi")
        assert memory.retrieve_all()[-1] == {"role": "user", "content": "hi"}


def test_add_returns_the_id_the_server_stores_and_keeps_every_field(make_memory):
    memory = make_memory()
    memory.add(role="user", content="list files")
    call_id = memory.add(
        role="assistant", content=None, tool_calls=[CALL], agent_calls=[{"agent_name": "B", "request": {"q": 1}}]
    )
    tool_id = memory.add(role="tool", content={"files": ["a"]}, tool_call_id="call_1", name="ls")
    message = Message(role="assistant", content="done", structured_data={"ok": True}, reasoning_details=[{"t": "x"}])
    assert memory.add(message) == message.message_id

    rows = {str(row.pk): row for row in MessageRow.objects.filter(session_id=memory.session_id)}
    assert rows[call_id].tool_calls == [CALL]
    assert rows[call_id].agent_calls == [{"agent_name": "B", "request": {"q": 1}}]
    assert (rows[tool_id].tool_call_id, rows[tool_id].content) == ("call_1", {"files": ["a"]})
    assert rows[message.message_id].structured_data == {"ok": True}
    assert memory.retrieve_all() == [
        {"role": "user", "content": "list files"},
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "content": '{"files":["a"]}', "tool_call_id": "call_1", "name": "ls"},
        {"role": "assistant", "content": "done", "reasoning_details": [{"t": "x"}]},
    ]


def test_add_accepts_dataclass_calls(make_memory):
    memory = make_memory()
    call = ToolCallMsg(id="call_9", call_id="call_9", type="function", name="grep", arguments="{}")
    memory.add(role="assistant", tool_calls=[call], agent_calls=[AgentCallMsg(agent_name="B", request="go")])
    assert memory.retrieve_recent(1)[0]["tool_calls"] == [call.to_dict()]


def test_an_image_path_is_sent_as_a_data_url_content_part(make_memory, png_path):
    memory = make_memory()
    memory.add(role="user", content="what is this?", images=[str(png_path)])
    memory.add(role="user", images=[str(png_path), "https://example.com/cat.jpg"])

    row = MessageRow.objects.filter(session_id=memory.session_id).order_by("seq").first()
    assert row.images == [PNG_DATA_URL]  # the server holds the bytes, never the path
    assert memory.retrieve_all() == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "what is this?"},
                {"type": "image_url", "image_url": {"url": PNG_DATA_URL}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "image_url", "image_url": {"url": PNG_DATA_URL}},
                {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}},
            ],
        },
    ]


def test_update_changes_only_the_given_fields(make_memory, png_path):
    memory = make_memory()
    memory.add(role="assistant", tool_calls=[CALL])
    tool_id = memory.add(role="tool", content="a.txt", tool_call_id="call_1", name="ls")
    user_id = memory.add(role="user", content="old")

    memory.update(user_id, content="new", name="alice", images=[str(png_path)])
    memory.update(tool_id, content="b.txt")

    assert memory.retrieve_by_id(user_id) == {
        "role": "user",
        "content": [{"type": "text", "text": "new"}, {"type": "image_url", "image_url": {"url": PNG_DATA_URL}}],
        "name": "alice",
    }
    # marsys's update() would drop tool_call_id here; the server keeps it.
    assert memory.retrieve_by_id(tool_id) == {
        "role": "tool",
        "content": "b.txt",
        "tool_call_id": "call_1",
        "name": "ls",
    }


def test_retrieve_recent_counts_the_system_prompt_like_marsys(make_memory):
    memory = make_memory(description="sys")
    for text in ("one", "two", "three"):
        memory.add(role="user", content=text)

    assert [m["content"] for m in memory.retrieve_recent()] == ["three"]
    assert [m["content"] for m in memory.retrieve_recent(2)] == ["two", "three"]
    assert [m["content"] for m in memory.retrieve_recent(4)] == ["sys", "one", "two", "three"]
    assert [m["content"] for m in memory.retrieve_recent(50)] == ["sys", "one", "two", "three"]
    assert memory.retrieve_recent(0) == []
    assert memory.retrieve_recent(-1) == []


def test_get_messages_is_retrieve_all(make_memory):
    memory = make_memory(description="sys")
    memory.add(role="user", content="hi")
    assert memory.get_messages() == memory.retrieve_all()


def test_retrieve_by_role_includes_the_prompt_for_system_and_limits_to_the_last_n(make_memory):
    memory = make_memory(description="sys")
    memory.add(role="user", content="u1")
    memory.add(role="assistant", content="a1")
    memory.add(role="user", content="u2")
    memory.add(role="system", content="late system note")

    assert [m["content"] for m in memory.retrieve_by_role("user")] == ["u1", "u2"]
    assert [m["content"] for m in memory.retrieve_by_role("user", 1)] == ["u2"]
    assert [m["content"] for m in memory.retrieve_by_role("user", 0)] == ["u1", "u2"]
    assert [m["content"] for m in memory.retrieve_by_role("system")] == ["sys", "late system note"]
    assert [m["content"] for m in memory.retrieve_by_role("system", 5)] == ["sys", "late system note"]
    assert memory.retrieve_by_role("wizard") == []


def test_retrieve_by_id_returns_none_for_unknown_or_malformed_ids(make_memory):
    memory = make_memory()
    message_id = memory.add(role="user", content="hi")
    assert memory.retrieve_by_id(message_id) == {"role": "user", "content": "hi"}
    assert memory.retrieve_by_id(message_id.upper()) == {"role": "user", "content": "hi"}
    assert memory.retrieve_by_id(str(uuid.uuid4())) is None
    assert memory.retrieve_by_id("not-a-uuid") is None


def test_remove_by_id_reports_whether_it_removed(make_memory):
    memory = make_memory(description="sys")
    message_id = memory.add(role="user", content="hi")
    assert memory.remove_by_id(message_id) is True
    assert memory.remove_by_id(message_id) is False
    assert memory.remove_by_id("nope") is False
    assert memory.retrieve_all() == [{"role": "system", "content": "sys"}]


def test_replace_memory_uses_marsys_positions(make_memory):
    memory = make_memory(description="sys")
    first = memory.add(role="user", content="one")
    memory.add(role="user", content="two")

    memory.replace_memory(2, role="assistant", content="TWO", name="bot")
    memory.replace_memory(1, Message(role="user", content="ONE", structured_data={"k": 1}))
    memory.replace_memory(0, role="system", content="new sys")

    assert memory.retrieve_all() == [
        {"role": "system", "content": "new sys"},
        {"role": "user", "content": "ONE"},
        {"role": "assistant", "content": "TWO", "name": "bot"},
    ]
    # The row keeps its server id (marsys would give it a new one).
    assert memory.retrieve_by_id(first) == {"role": "user", "content": "ONE"}
    assert MessageRow.objects.get(pk=first).structured_data == {"k": 1}


def test_replace_memory_without_a_prompt_starts_at_the_first_row(make_memory):
    memory = make_memory()
    memory.add(role="user", content="one")
    memory.replace_memory(0, role="user", content="uno")
    assert memory.retrieve_all() == [{"role": "user", "content": "uno"}]


def test_replace_memory_clears_fields_the_new_message_does_not_have(make_memory):
    memory = make_memory()
    memory.add(role="assistant", tool_calls=[CALL])
    memory.add(role="tool", content="a.txt", tool_call_id="call_1")
    memory.replace_memory(1, role="user", content="plain")
    assert memory.retrieve_all()[1] == {"role": "user", "content": "plain"}


def test_delete_memory_deletes_by_position_and_index_0_clears_the_prompt(make_memory):
    memory = make_memory(description="sys")
    memory.add(role="user", content="one")
    memory.add(role="user", content="two")

    memory.delete_memory(1)
    assert [m["content"] for m in memory.retrieve_all()] == ["sys", "two"]
    memory.delete_memory(0)
    assert memory.retrieve_all() == [{"role": "user", "content": "two"}]
    assert Session.objects.get(pk=memory.session_id).system_prompt == ""


def test_index_methods_raise_index_error_out_of_range(make_memory):
    memory = make_memory(description="sys")
    memory.add(role="user", content="one")
    for call in (
        lambda: memory.replace_memory(2, role="user", content="x"),
        lambda: memory.replace_memory(-1, role="user", content="x"),
        lambda: memory.delete_memory(2),
        lambda: memory.delete_memory(-1),
    ):
        with pytest.raises(IndexError, match="Memory index out of range"):
            call()


def test_reset_memory_keeps_the_prompt(make_memory):
    memory = make_memory(description="sys")
    memory.add(role="user", content="one")
    memory.reset_memory()
    assert memory.retrieve_all() == [{"role": "system", "content": "sys"}]
    assert not MessageRow.objects.filter(session_id=memory.session_id).exists()


def test_reset_memory_keeps_a_leading_system_message_like_marsys(make_memory):
    memory = make_memory()
    system_id = memory.add(role="system", content="set later")
    memory.add(role="user", content="one")
    memory.reset_memory()
    assert memory.retrieve_all() == [{"role": "system", "content": "set later"}]
    assert memory.retrieve_by_id(system_id) == {"role": "system", "content": "set later"}


def test_context_is_the_servers_llm_window(make_memory):
    memory = make_memory(description="sys")
    for text in ("one", "two", "three"):
        memory.add(role="user", content=text)
    assert memory.context(last=2) == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "two"},
        {"role": "user", "content": "three"},
    ]


def test_managed_conversation_is_stored_as_the_session_memory_type(make_memory):
    memory = make_memory("managed_conversation", "sys", model=None, memory_config=None, token_counter=None)
    assert Session.objects.get(pk=memory.session_id).memory_type == "managed_conversation"
    assert memory.memory_type == "managed_conversation"


def test_reads_see_other_agents_writes_immediately(make_memory, client_tenant):
    memory = make_memory()
    other = make_memory(session_id=memory.session_id)
    message_id = other.add(role="user", content="written elsewhere")
    assert memory.retrieve_by_id(message_id) == {"role": "user", "content": "written elsewhere"}
    with pytest.raises(MessageError):
        memory.update("not-a-uuid", content="x")


def test_dict_content_keeps_its_key_order(make_memory):
    memory = make_memory()
    memory.add(role="assistant", content={"zeta": 1, "alpha": [{"type": "text", "text": "x"}]})
    assert memory.retrieve_all() == [
        {"role": "assistant", "content": '{"zeta":1,"alpha":[{"type":"text","text":"x"}]}'}
    ]
