"""Conversation export/import in TaskWeaver's to_dict/from_dict shape, as JSON and YAML."""

from __future__ import annotations

import copy

import pytest
import yaml

from memory_app.conversations.models import Message, Session
from memory_app.events.models import MemoryEvent
from memory_app.rounds.models import Attachment, Round, SharedMemoryEntry
from memory_client.conversation import ATTACHMENT_TYPES, Conversation
from tests.memory_app.rounds.conversation_docs import (
    attachment,
    data_analysis_conversation,
    minimal_conversation,
    post,
    round_,
)

pytestmark = pytest.mark.django_db

IMPORT = "/api/v1/sessions/conversation/import/"
MEMSITE_KEYS = ("session", "shared_memory")


def import_json(api, document) -> dict:
    response = api.post(IMPORT, document, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def import_yaml(api, text: str):
    return api.generic("POST", IMPORT, text.encode(), content_type="application/yaml")


def export_json(api, session_id: str) -> dict:
    response = api.get(f"/api/v1/sessions/{session_id}/conversation/", {"format": "json"})
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/json")
    return response.json()


def export_yaml(api, session_id: str) -> str:
    response = api.get(f"/api/v1/sessions/{session_id}/conversation/", {"format": "yaml"})
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("application/yaml")
    return response.content.decode()


def seed_part(document: dict) -> dict:
    return {key: value for key, value in document.items() if key not in MEMSITE_KEYS}


def all_types(document: dict) -> set[str]:
    return {a["type"] for r in document["rounds"] for p in r["post_list"] for a in p["attachment_list"]}


def test_the_example_uses_every_taskweaver_attachment_type():
    assert all_types(data_analysis_conversation()) == set(ATTACHMENT_TYPES)


@pytest.mark.parametrize("build", [data_analysis_conversation, minimal_conversation])
def test_json_import_then_export_gives_the_same_conversation(api, build):
    original = build()
    answer = import_json(api, original)
    assert answer["warnings"] == []
    exported = export_json(api, answer["session_id"])
    assert seed_part(exported) == original
    assert list(exported)[:4] == ["id", "plugins", "enabled", "rounds"]  # Conversation.to_dict's order


@pytest.mark.parametrize("build", [data_analysis_conversation, minimal_conversation])
def test_yaml_import_then_export_gives_the_same_conversation(api, build):
    original = build()
    text = yaml.safe_dump(original, sort_keys=False, allow_unicode=True)
    response = import_yaml(api, text)
    assert response.status_code == 201, response.content
    exported_text = export_yaml(api, response.json()["session_id"])
    assert seed_part(yaml.safe_load(exported_text)) == original


def test_an_export_imports_again_into_an_equal_session(api):
    first = import_json(api, data_analysis_conversation())
    exported = export_json(api, first["session_id"])
    second = import_json(api, exported)
    again = export_json(api, second["session_id"])
    assert again == exported


def test_the_client_dataclasses_read_and_write_the_same_dicts(api):
    original = data_analysis_conversation()
    assert Conversation.from_dict(original).to_dict() == original
    answer = import_json(api, original)
    assert Conversation.from_dict(export_json(api, answer["session_id"])).to_dict() == original


def test_posts_become_messages_in_order_and_carried_entries_are_recorded(api):
    answer = import_json(api, data_analysis_conversation())
    assert (answer["rounds"], answer["posts"]) == (3, 9)
    session = Session.objects.get(pk=answer["session_id"])
    messages = list(Message.objects.filter(session=session).order_by("seq"))
    assert [m.seq for m in messages] == list(range(1, 10))
    assert [m.role for m in messages[:4]] == ["user", "assistant", "assistant", "assistant"]
    assert Round.objects.filter(session=session).count() == 3
    assert Attachment.objects.filter(message__session=session).count() == 23
    entries = SharedMemoryEntry.objects.filter(session=session).order_by("id")
    assert [(e.entry_id, e.scope, e.created_by, e.round.round_id) for e in entries] == [
        ("sme-000001", "conversation", "Planner", "round-20240105-000001"),
        ("sme-000002", "round", "Planner", "round-20240105-000002"),
    ]
    context = api.get(f"/api/v1/sessions/{session.pk}/context/", {"last": 3}).json()["messages"]
    assert context[-1] == {"role": "assistant", "content": "Search the web."}
    assert MemoryEvent.objects.get(session=session).kind == "imported"


def test_a_removed_attachment_type_is_dropped_with_a_warning_never_a_failure(api):
    original = data_analysis_conversation()
    old = copy.deepcopy(original)
    planner_post = old["rounds"][0]["post_list"][1]["attachment_list"]
    planner_post.insert(0, attachment("atta-old-1", "init_plan", "1. load data.csv <interactively depends on 2>"))
    old["rounds"][2]["post_list"][1]["attachment_list"].append(attachment("atta-old-2", "board", "x"))
    answer = import_json(api, old)
    assert answer["warnings"] == [
        "rounds[0].post_list[1].attachment_list[0]: removed attachment type 'init_plan' dropped",
        "rounds[2].post_list[1].attachment_list[5]: removed attachment type 'board' dropped",
    ]
    assert seed_part(export_json(api, answer["session_id"])) == original


def test_a_removed_type_in_yaml_is_dropped_too(api):
    text = yaml.safe_dump(
        {
            "id": "conv-old",
            "enabled": True,
            "rounds": [
                round_(
                    "round-1",
                    "q",
                    "finished",
                    post(
                        "post-1",
                        "m",
                        "Planner",
                        "User",
                        attachment("a1", "init_plan", "p"),
                        attachment("a2", "plan", "p"),
                    ),
                )
            ],
        }
    )
    response = import_yaml(api, text)
    assert response.status_code == 201
    assert response.json()["warnings"] == [
        "rounds[0].post_list[0].attachment_list[0]: removed attachment type 'init_plan' dropped"
    ]
    exported = export_json(api, response.json()["session_id"])
    assert [a["type"] for a in exported["rounds"][0]["post_list"][0]["attachment_list"]] == ["plan"]


def test_a_document_that_is_not_a_conversation_is_refused_with_every_path(api):
    broken = {"rounds": [{"user_query": 5, "state": "done", "post_list": [{"message": "m", "send_from": "A"}]}]}
    response = api.post(IMPORT, broken, format="json")
    assert response.status_code == 400
    assert set(response.json()["fields"]) == {
        "rounds[0].user_query",
        "rounds[0].state",
        "rounds[0].post_list[0].send_to",
    }
    assert Session.objects.count() == 0
    assert api.post(IMPORT, {"id": "conv"}, format="json").json()["fields"] == {"rounds": ["required"]}


def test_yaml_is_read_with_safe_load_only(api):
    hostile = "!!python/object/apply:os.system ['touch /tmp/pwned']\n"
    response = import_yaml(api, hostile)
    assert response.status_code == 400
    assert response.json()["error"] == "parse_error"
    assert Session.objects.count() == 0


def test_yaml_dates_arrive_as_their_text(api):
    text = "id: conv-d\nenabled: true\nplugins: [{name: p, since: 2024-01-05}]\nrounds: []\n"
    response = import_yaml(api, text)
    assert response.status_code == 201, response.content
    assert export_json(api, response.json()["session_id"])["plugins"] == [{"name": "p", "since": "2024-01-05"}]


def test_standalone_shared_memory_and_the_session_fields_round_trip(api, session_id):
    api.post(f"/api/v1/sessions/{session_id}/rounds/", {"user_query": "q", "id": "round-a"}, format="json")
    api.post(
        f"/api/v1/sessions/{session_id}/shared-memory/",
        {"type": "plan", "content": "p", "scope": "round", "created_by": "Planner", "id": "sme-a"},
        format="json",
    )
    exported = export_json(api, session_id)
    assert exported["shared_memory"] == [
        {"type": "plan", "content": "p", "scope": "round", "id": "sme-a", "round": "round-a", "created_by": "Planner"}
    ]
    assert exported["session"]["system_prompt"] == "You are helpful"
    copy_id = import_json(api, exported)["session_id"]
    assert export_json(api, copy_id) == exported
    assert Session.objects.get(pk=copy_id).system_prompt == "You are helpful"
