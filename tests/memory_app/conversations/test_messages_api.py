"""Appending, listing, editing and deleting messages; validation that writes nothing."""

from __future__ import annotations

import base64
import uuid

import pytest

from memory_app.conversations.models import Message

pytestmark = pytest.mark.django_db

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32
PNG_URL = "data:image/png;base64," + base64.b64encode(PNG).decode()


def url(session_id: str, suffix: str = "") -> str:
    return f"/api/v1/sessions/{session_id}/messages/{suffix}"


def tool_call(call_id: str = "call_1") -> dict:
    return {"id": call_id, "type": "function", "function": {"name": "ls", "arguments": '{"path": "."}'}}


def test_it_appends_one_message_and_returns_id_and_seq(api, session_id):
    response = api.post(url(session_id), {"role": "user", "content": "hello"}, format="json")
    assert response.status_code == 201
    body = response.json()
    assert body["seq"] == 1
    stored = Message.objects.get(pk=body["message_id"])
    assert (stored.role, stored.content, stored.token_count) == ("user", "hello", body["token_count"])
    assert stored.token_count > 0


def test_it_appends_a_batch_atomically_in_order(api, session_id):
    batch = {
        "messages": [
            {"role": "user", "content": "list files"},
            {"role": "assistant", "content": None, "tool_calls": [tool_call()]},
            {"role": "tool", "tool_call_id": "call_1", "name": "ls", "content": "a.txt"},
            {"role": "assistant", "content": "There is a.txt"},
        ]
    }
    response = api.post(url(session_id), batch, format="json")
    assert response.status_code == 201
    assert [m["seq"] for m in response.json()["messages"]] == [1, 2, 3, 4]
    assert list(Message.objects.order_by("seq").values_list("role", flat=True)) == [
        "user",
        "assistant",
        "tool",
        "assistant",
    ]


def test_a_batch_with_one_bad_message_writes_nothing(api, session_id):
    batch = {"messages": [{"role": "user", "content": "ok"}, {"role": "wizard", "content": "no"}]}
    response = api.post(url(session_id), batch, format="json")
    assert response.status_code == 400
    assert response.json()["fields"] == {"messages[1].role": ['"wizard" is not a valid choice.']}
    assert Message.objects.count() == 0


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"role": "shouter", "content": "x"}, "role"),
        ({"content": "x"}, "role"),
        ({"role": "user", "content": 5}, "content"),
        ({"role": "user", "content": [{"type": "video", "url": "x"}]}, "content[0]"),
        ({"role": "user", "content": [{"type": "text"}]}, "content[0]"),
        ({"role": "tool", "content": "x"}, "tool_call_id"),
        ({"role": "user", "content": "x", "tool_call_id": "c"}, "tool_call_id"),
        ({"role": "user", "tool_calls": [tool_call()]}, "tool_calls"),
        ({"role": "assistant", "tool_calls": [{"id": "c", "type": "function"}]}, "tool_calls[0].function"),
        ({"role": "assistant", "tool_calls": [{"id": "c", "type": "code", "function": {}}]}, "tool_calls[0].type"),
        ({"role": "assistant", "tool_calls": [tool_call("a"), tool_call("a")]}, "tool_calls"),
        ({"role": "assistant", "tool_calls": "ls"}, "tool_calls"),
        ({"role": "user", "name": ["x"]}, "name"),
        ({"role": "user", "structured_data": [1]}, "structured_data"),
        ({"role": "user", "images": "x.png"}, "images"),
        ({"role": "user", "message_id": "not-a-uuid"}, "message_id"),
    ],
)
def test_it_rejects_malformed_messages_naming_the_field(api, session_id, payload, field):
    response = api.post(url(session_id), payload, format="json")
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["error"] == "validation_error"
    assert field in body["fields"], body
    assert Message.objects.count() == 0


def test_it_rejects_orphan_tool_messages(api, session_id):
    response = api.post(url(session_id), {"role": "tool", "tool_call_id": "nope", "content": "x"}, format="json")
    assert response.status_code == 400
    assert "tool_call_id" in response.json()["fields"]
    assert Message.objects.count() == 0


def test_it_accepts_a_tool_result_for_an_earlier_call(api, session_id):
    api.post(url(session_id), {"role": "assistant", "tool_calls": [tool_call("c9")]}, format="json")
    api.post(url(session_id), {"role": "user", "content": "meanwhile"}, format="json")
    response = api.post(url(session_id), {"role": "tool", "tool_call_id": "c9", "content": "done"}, format="json")
    assert response.status_code == 201


def test_an_orphan_tool_message_in_a_batch_names_its_index(api, session_id):
    batch = {"messages": [{"role": "user", "content": "x"}, {"role": "tool", "tool_call_id": "zz", "content": "y"}]}
    response = api.post(url(session_id), batch, format="json")
    assert response.status_code == 400
    assert "messages[1].tool_call_id" in response.json()["fields"]
    assert Message.objects.count() == 0


@pytest.mark.parametrize(
    "image",
    [
        "/etc/passwd",
        "file:///etc/passwd",
        "../../x.png",
        "data:image/png;base64,AAAA\x00",
        "data:image/png;base64," + base64.b64encode(b"GIF89a" + b"\x00" * 10).decode(),
        "data:text/plain;base64,aGVsbG8=",
        "ftp://example.com/x.png",
    ],
)
def test_it_refuses_image_references_that_are_not_data_or_http_urls(api, session_id, image, monkeypatch):
    opened: list[str] = []
    real_open = open

    def spy_open(path, *args, **kwargs):
        opened.append(str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr("builtins.open", spy_open)
    response = api.post(url(session_id), {"role": "user", "content": "see", "images": [image]}, format="json")
    assert response.status_code == 400
    assert "images[0]" in response.json()["fields"]
    assert not [p for p in opened if "passwd" in p or p.endswith("x.png")]
    assert Message.objects.count() == 0


def test_it_refuses_an_image_part_with_a_path(api, session_id):
    content = [{"type": "text", "text": "hi"}, {"type": "image_url", "image_url": {"url": "/etc/passwd"}}]
    response = api.post(url(session_id), {"role": "user", "content": content}, format="json")
    assert response.status_code == 400
    assert "content[1]" in response.json()["fields"]


def test_it_caps_image_size(api, session_id, settings):
    settings.MAX_IMAGE_BYTES = 1024
    big = "data:image/png;base64," + base64.b64encode(PNG + b"\x00" * 2048).decode()
    response = api.post(url(session_id), {"role": "user", "images": [big]}, format="json")
    assert response.status_code == 400
    assert "exceeds" in response.json()["fields"]["images[0]"][0]


def test_it_stores_valid_images(api, session_id):
    response = api.post(
        url(session_id), {"role": "user", "content": "look", "images": [PNG_URL, "https://x.test/a.png"]}, format="json"
    )
    assert response.status_code == 201
    assert Message.objects.get().images == [PNG_URL, "https://x.test/a.png"]


def test_oversize_bodies_get_a_json_413(api, session_id, settings):
    settings.MAX_BODY_BYTES = 2048
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 2048
    response = api.post(url(session_id), {"role": "user", "content": "x" * 5000}, format="json")
    assert response.status_code == 413
    assert response.json()["error"] == "payload_too_large"
    assert Message.objects.count() == 0


def test_invalid_json_is_a_400(api, session_id):
    response = api.generic("POST", url(session_id), "{not json", content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error"] == "parse_error"


def test_it_lists_with_role_last_and_cursor(api, session_id):
    api.post(
        url(session_id),
        {"messages": [{"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i}"} for i in range(7)]},
        format="json",
    )
    users = api.get(url(session_id), {"role": "user"}).json()["results"]
    assert [m["content"] for m in users] == ["m0", "m2", "m4", "m6"]
    last = api.get(url(session_id), {"last": 2}).json()["results"]
    assert [m["seq"] for m in last] == [6, 7]

    seen: list[int] = []
    cursor = None
    while True:
        params = {"limit": 3} | ({"after": cursor} if cursor is not None else {})
        page = api.get(url(session_id), params).json()
        seen += [m["seq"] for m in page["results"]]
        cursor = page["next_after"]
        if cursor is None:
            break
    assert seen == [1, 2, 3, 4, 5, 6, 7]


def test_it_reads_patches_and_deletes_one_message(api, session_id):
    message_id = api.post(url(session_id), {"role": "user", "content": "draft"}, format="json").json()["message_id"]
    assert api.get(url(session_id, f"{message_id}/")).json()["content"] == "draft"

    patched = api.patch(url(session_id, f"{message_id}/"), {"content": "a much longer final text"}, format="json")
    assert patched.status_code == 200
    assert patched.json()["content"] == "a much longer final text"
    assert patched.json()["token_count"] > Message.objects.none().count()
    assert Message.objects.get(pk=message_id).token_count == patched.json()["token_count"]

    bad = api.patch(url(session_id, f"{message_id}/"), {"role": "robot"}, format="json")
    assert bad.status_code == 400
    assert Message.objects.get(pk=message_id).role == "user"

    assert api.delete(url(session_id, f"{message_id}/")).status_code == 204
    assert api.get(url(session_id, f"{message_id}/")).status_code == 404


def test_a_client_chosen_message_id_makes_retries_idempotent(api, session_id):
    chosen = str(uuid.uuid4())
    first = api.post(url(session_id), {"message_id": chosen, "role": "user", "content": "once"}, format="json")
    again = api.post(url(session_id), {"message_id": chosen, "role": "user", "content": "once"}, format="json")
    assert (first.status_code, again.status_code) == (201, 200)
    assert first.json() == again.json()
    assert Message.objects.count() == 1


def test_a_client_chosen_message_id_resent_with_other_content_is_a_422(api, session_id):
    chosen = "7d3f1a2b-4c5e-4f60-8a9b-0c1d2e3f4a5b"
    api.post(url(session_id), {"message_id": chosen, "role": "user", "content": "first"}, format="json")
    changed = api.post(url(session_id), {"message_id": chosen, "role": "user", "content": "second"}, format="json")
    assert changed.status_code == 422, changed.content
    assert changed.json()["error"] == "message_id_reused"
    assert list(changed.json()["fields"]) == ["message_id"]
    batch = {
        "messages": [
            {"role": "user", "content": "x", "message_id": "1d3f1a2b-4c5e-4f60-8a9b-0c1d2e3f4a5b"},
            {"message_id": chosen, "role": "assistant", "content": "first"},
        ]
    }
    refused = api.post(url(session_id), batch, format="json")
    assert refused.status_code == 409, refused.content  # a batch mixing new and stored ids
    assert Message.objects.filter(session_id=session_id).count() == 1
    assert Message.objects.get(pk=chosen).content == "first"


def test_a_message_id_from_another_session_conflicts(api, session_id):
    chosen = str(uuid.uuid4())
    api.post(url(session_id), {"message_id": chosen, "role": "user", "content": "x"}, format="json")
    other = api.post("/api/v1/sessions/", {}, format="json").json()["id"]
    response = api.post(url(other), {"message_id": chosen, "role": "user", "content": "x"}, format="json")
    assert response.status_code == 409
    assert Message.objects.count() == 1


def test_reset_clears_messages_keeps_the_system_prompt_and_records_an_event(api, session_id):
    api.post(
        url(session_id),
        {"messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]},
        format="json",
    )
    response = api.post(f"/api/v1/sessions/{session_id}/reset/")
    assert response.status_code == 200
    assert response.json() == {"deleted_messages": 2}
    assert Message.objects.count() == 0
    context = api.get(f"/api/v1/sessions/{session_id}/context/").json()
    assert context["messages"] == [{"role": "system", "content": "You are helpful"}]
    from memory_app.events.models import MemoryEvent

    assert MemoryEvent.objects.filter(session_id=session_id, kind="reset").count() == 1
    # seqs keep increasing after a reset: old ids are never reused
    again = api.post(url(session_id), {"role": "user", "content": "c"}, format="json").json()
    assert again["seq"] == 3


def test_a_batch_mixing_a_stored_id_with_new_messages_conflicts_and_writes_nothing(api, session_id):
    chosen = str(uuid.uuid4())
    api.post(url(session_id), {"message_id": chosen, "role": "user", "content": "old"}, format="json")
    batch = {"messages": [{"message_id": chosen, "role": "user", "content": "old"}, {"role": "user", "content": "NEW"}]}
    response = api.post(url(session_id), batch, format="json")
    assert response.status_code == 409
    assert list(Message.objects.values_list("content", flat=True)) == ["old"]


def test_a_batch_repeating_one_message_id_is_a_400(api, session_id):
    chosen = str(uuid.uuid4())
    batch = {"messages": [{"message_id": chosen, "role": "user"}, {"message_id": chosen, "role": "user"}]}
    response = api.post(url(session_id), batch, format="json")
    assert response.status_code == 400
    assert "messages" in response.json()["fields"]
    assert Message.objects.count() == 0


@pytest.mark.parametrize(
    ("original", "patch", "field"),
    [
        ({"role": "assistant", "tool_calls": [tool_call("k")]}, {"role": "user"}, "tool_calls"),
        ({"role": "tool", "tool_call_id": "k", "content": "r"}, {"role": "user"}, "tool_call_id"),
    ],
)
def test_a_role_change_is_checked_against_the_stored_fields(api, session_id, original, patch, field):
    if original["role"] == "tool":
        api.post(url(session_id), {"role": "assistant", "tool_calls": [tool_call("k")]}, format="json")
    message_id = api.post(url(session_id), original, format="json").json()["message_id"]
    response = api.patch(url(session_id, f"{message_id}/"), patch, format="json")
    assert response.status_code == 400
    assert field in response.json()["fields"]
    assert Message.objects.get(pk=message_id).role == original["role"]


def test_dict_content_keeps_its_key_order_on_every_database(api, session_id):
    content = {"zeta": 1, "alpha": [{"type": "text", "text": "x"}], "mid": None}
    api.post(url(session_id), {"role": "assistant", "content": content}, format="json")
    assert list(Message.objects.get().content) == ["zeta", "alpha", "mid"]
    context = api.get(f"/api/v1/sessions/{session_id}/context/").json()["messages"]
    assert context[-1]["content"] == '{"zeta":1,"alpha":[{"type":"text","text":"x"}],"mid":null}'


@pytest.mark.parametrize("encoding", ["cl100k_base", "o200k_base"])
def test_cached_counts_use_the_configured_encoding(api, session_id, settings, encoding):
    from memory_app.conversations import tokens

    settings.TOKEN_ENCODING = encoding
    text = "Ünïcödé and 東京 in one message, counted once at write time."
    response = api.post(url(session_id), {"role": "user", "content": text}, format="json")
    expected = tokens.count_message({"role": "user", "content": text}, encoding=encoding)
    assert response.json()["token_count"] == expected == Message.objects.get().token_count
