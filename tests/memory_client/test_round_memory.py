"""memory_client's Memory (TaskWeaver-style rounds) and its dataclasses, against a live server over real HTTP."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import yaml

from memory_app.conversations.models import Message
from memory_client import Attachment, AttachmentType, Conversation, Memory, Post, Round, SharedMemoryEntry
from tests.conftest import Tenant
from tests.memory_app.rounds.conversation_docs import attachment, data_analysis_conversation


@pytest.fixture
def make_rounds(server_url: str, client_tenant: Tenant) -> Iterator[Callable[..., Memory]]:
    made: list[Memory] = []

    def make(*args: Any, **kwargs: Any) -> Memory:
        kwargs.setdefault("base_url", server_url)
        kwargs.setdefault("api_key", client_tenant.key)
        memory = Memory(*args, **kwargs)
        made.append(memory)
        return memory

    yield make
    for memory in made:
        memory.close()


# --- dataclasses (no server) ---------------------------------------------------------------


def test_attachment_from_dict_gives_none_for_a_removed_type_and_post_leaves_it_out():
    assert Attachment.from_dict({"id": "a", "type": "init_plan", "content": "p", "extra": None}) is None
    post = Post.from_dict(
        {
            "id": "post-1",
            "message": "m",
            "send_from": "Planner",
            "send_to": "User",
            "attachment_list": [attachment("a1", "init_plan", "p"), attachment("a2", "plan", "p")],
        }
    )
    assert [a.type for a in post.attachment_list] == [AttachmentType.plan]
    assert post.get_attachment(AttachmentType.plan) == ["p"]


def test_the_dataclasses_write_the_to_dict_shapes_they_read():
    document = data_analysis_conversation()
    conversation = Conversation.from_dict(document)
    assert conversation.to_dict() == document
    first = document["rounds"][0]
    assert Round.from_dict(first).to_dict() == first
    assert Post.from_dict(first["post_list"][1]).to_dict() == first["post_list"][1]
    entry = {"type": "plan", "content": "p", "scope": "round", "id": "sme-1"}
    assert SharedMemoryEntry.from_dict(entry).to_dict() == entry


def test_created_ids_follow_the_taskweaver_prefixes():
    assert Round.create("q").id.startswith("round-")
    assert Post.create("m", "A", "B").id.startswith("post-")
    assert Attachment.create("plan", "p").id.startswith("atta-")
    assert SharedMemoryEntry.create("plan", "p", "round").id.startswith("sme-")


# --- against the server ----------------------------------------------------------------------


def _conversation(memory: Memory) -> tuple[Round, Round, Round]:
    r1 = memory.create_round("count rows")
    memory.add_post(r1.id, Post.create("count rows", "User", "Planner"))
    memory.add_post(
        r1.id,
        Post.create("count them", "Planner", "CodeInterpreter", [Attachment.create(AttachmentType.plan, "1. count")]),
    )
    memory.add_post(r1.id, Post.create("42", "CodeInterpreter", "Planner"))
    memory.set_round_state(r1.id, "finished")
    r2 = memory.create_round("plot")
    memory.add_post(r2.id, Post.create("plot", "Planner", "CodeInterpreter"))
    memory.set_round_state(r2.id, "failed")
    r3 = memory.create_round("thanks")
    memory.add_post(r3.id, Post.create("thanks", "User", "Planner"))
    return r1, r2, r3


def test_get_role_rounds_with_and_without_failure_rounds(make_rounds):
    memory = make_rounds()
    r1, r2, r3 = _conversation(memory)
    coder = memory.get_role_rounds("CodeInterpreter")
    assert [(r.id, r.state, [p.message for p in r.post_list]) for r in coder] == [
        (r1.id, "finished", ["count them", "42"]),
        (r3.id, "created", []),  # kept, like TaskWeaver's: the role has no post in it
    ]
    assert coder[0].post_list[0].attachment_list[0].type == AttachmentType.plan
    with_failures = memory.get_role_rounds("CodeInterpreter", include_failure_rounds=True)
    assert [r.id for r in with_failures] == [r1.id, r2.id, r3.id]
    assert len(memory.get_rounds()) == 3


def test_get_role_rounds_keeps_every_round_with_its_query_for_a_role_without_posts(make_rounds):
    memory = make_rounds()
    r1, _, r3 = _conversation(memory)
    rounds = memory.get_role_rounds("Reviewer")
    assert [(r.id, r.user_query, r.state, r.post_list) for r in rounds] == [
        (r1.id, "count rows", "finished", []),
        (r3.id, "thanks", "created", []),
    ]


def test_posts_keep_their_ids_and_a_resent_round_id_is_the_same_round(make_rounds):
    memory = make_rounds()
    round_ = memory.create_round("q", round_id="round-fixed")
    assert memory.create_round("q", round_id="round-fixed").id == "round-fixed"
    sent = Post.create("m", "Planner", "User", [Attachment.create("thought", "t", extra={"k": [1, 2]})])
    stored = memory.add_post(round_.id, sent)
    assert stored.to_dict() == sent.to_dict()
    assert len(memory.get_rounds()) == 1


def test_shared_memory_entries_of_both_scopes(make_rounds):
    memory = make_rounds()
    r1 = memory.create_round("one")
    memory.add_shared_memory_entry(SharedMemoryEntry.create("plan", "overall", "conversation"), created_by="Planner")
    memory.add_shared_memory_entry(SharedMemoryEntry.create("plan", "step 1", "round"), created_by="Coder")
    assert [e.content for e in memory.get_shared_memory_entries("plan")] == ["overall", "step 1"]
    memory.create_round("two")
    assert [e.content for e in memory.get_shared_memory_entries("plan")] == ["overall"]
    memory.add_shared_memory_entry(SharedMemoryEntry.create("plan", "late", "round"), round_id=r1.id, created_by="X")
    assert [e.content for e in memory.get_shared_memory_entries("plan")] == ["overall"]


def test_conversation_import_and_export_through_the_client(make_rounds, server_url, client_tenant):
    old = data_analysis_conversation()
    old["rounds"][0]["post_list"][0]["attachment_list"].append(attachment("atta-old", "init_plan", "p"))
    memory, warnings = Memory.import_conversation(
        yaml.safe_dump(old, allow_unicode=True), base_url=server_url, api_key=client_tenant.key
    )
    try:
        assert warnings == ["rounds[0].post_list[0].attachment_list[0]: removed attachment type 'init_plan' dropped"]
        assert memory.get_conversation().to_dict() == data_analysis_conversation()
        exported = yaml.safe_load(memory.export_conversation("yaml"))
        assert {k: v for k, v in exported.items() if k != "session"} == data_analysis_conversation()
    finally:
        memory.close()


def test_scratch_goes_to_the_next_agent_post(make_rounds):
    memory = make_rounds()
    round_ = memory.create_round("list files")
    memory.add_post(round_.id, Post.create("list files", "User", "Planner"))
    memory.record_scratch("run_command", "file1.txt", 0.5)
    memory.record_scratch("read_file", "# README", 0.2)
    answer = memory.add_post(round_.id, Post.create("I found your files", "Planner", "User"))
    stored = Message.objects.get(post_id=answer.id)
    assert stored.meta == {
        "scratch": [
            {"action": "run_command", "observation": "file1.txt", "duration": 0.5},
            {"action": "read_file", "observation": "# README", "duration": 0.2},
        ]
    }
    assert Message.objects.get(post_id__isnull=False, send_from="User").meta is None


def test_attaching_to_an_existing_session(make_rounds):
    first = make_rounds(system_prompt="p")
    first.create_round("q", round_id="round-a")
    second = make_rounds(first.session_id)
    assert [r.id for r in second.get_rounds()] == ["round-a"]
    with pytest.raises(ValueError, match="UUID"):
        make_rounds("not-a-uuid")
