"""Rounds and posts (TaskWeaver-style): posts are messages of the session, with typed attachments."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from memory_app.conversations.models import Message, Session
from memory_app.rounds import selectors as round_selectors
from memory_app.rounds.models import Attachment, Round, SharedMemoryEntry
from memory_client.conversation import ATTACHMENT_TYPES

pytestmark = pytest.mark.django_db


def rounds_url(session_id: str) -> str:
    return f"/api/v1/sessions/{session_id}/rounds/"


def new_round(api, session_id: str, query: str, **extra) -> dict:
    response = api.post(rounds_url(session_id), {"user_query": query, **extra}, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def post(api, session_id: str, round_id: str, message: str, send_from: str, send_to: str, attachments=(), **extra):
    body = {"message": message, "send_from": send_from, "send_to": send_to, "attachment_list": list(attachments)}
    response = api.post(f"{rounds_url(session_id)}{round_id}/posts/", {**body, **extra}, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def set_state(api, session_id: str, round_id: str, state: str) -> dict:
    response = api.patch(f"{rounds_url(session_id)}{round_id}/", {"state": state}, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def test_rounds_are_numbered_in_order_and_start_created(api, session_id):
    first = new_round(api, session_id, "count the rows")
    second = new_round(api, session_id, "now the columns", id="round-mine")
    assert (first["order"], first["state"], first["post_list"]) == (1, "created", [])
    assert first["id"].startswith("round-")
    assert (second["id"], second["order"]) == ("round-mine", 2)
    listed = api.get(rounds_url(session_id)).json()
    assert [r["id"] for r in listed["results"]] == [first["id"], "round-mine"]
    assert listed["next_after"] is None


def test_resending_a_round_id_returns_the_stored_round_and_another_query_conflicts(api, session_id):
    new_round(api, session_id, "q", id="round-1")
    again = api.post(rounds_url(session_id), {"user_query": "q", "id": "round-1"}, format="json")
    assert again.status_code == 200
    assert again.json()["order"] == 1
    clash = api.post(rounds_url(session_id), {"user_query": "other", "id": "round-1"}, format="json")
    assert clash.status_code == 409
    assert Round.objects.count() == 1


def test_patch_changes_the_state_and_refuses_unknown_states(api, session_id):
    round_id = new_round(api, session_id, "q")["id"]
    assert set_state(api, session_id, round_id, "failed")["state"] == "failed"
    assert set_state(api, session_id, round_id, "finished")["state"] == "finished"
    bad = api.patch(f"{rounds_url(session_id)}{round_id}/", {"state": "done"}, format="json")
    assert bad.status_code == 400
    assert "state" in bad.json()["fields"]
    assert api.get(f"{rounds_url(session_id)}round-nope/").status_code == 404


def test_a_post_is_a_message_with_its_seq_and_attachments_in_order(api, session_id):
    round_id = new_round(api, session_id, "count rows")["id"]
    api.post(f"/api/v1/sessions/{session_id}/messages/", {"role": "user", "content": "plain"}, format="json")
    attachments = [
        {"type": "thought", "content": "read the csv"},
        {"type": "reply_content", "content": "df = pd.read_csv('data.csv')", "extra": {"lang": "python"}},
    ]
    created = post(api, session_id, round_id, "running code", "CodeInterpreter", "Planner", attachments)
    assert created["seq"] == 2  # the session's one counter
    assert created["role"] == "assistant"
    assert created["round"] == round_id
    assert [(a["type"], a["content"], a["extra"]) for a in created["attachment_list"]] == [
        ("thought", "read the csv", None),
        ("reply_content", "df = pd.read_csv('data.csv')", {"lang": "python"}),
    ]
    message = Message.objects.get(pk=created["message_id"])
    assert (message.content, message.send_from, message.send_to, message.round.round_id) == (
        "running code",
        "CodeInterpreter",
        "Planner",
        round_id,
    )
    assert message.token_count > 0


def test_posts_appear_in_the_context_in_seq_order_among_other_messages(api, session_id):
    round_id = new_round(api, session_id, "count rows")["id"]
    post(api, session_id, round_id, "count the rows of data.csv", "User", "Planner")
    api.post(f"/api/v1/sessions/{session_id}/messages/", {"role": "assistant", "content": "noted"}, format="json")
    post(api, session_id, round_id, "please count", "Planner", "CodeInterpreter")
    post(api, session_id, round_id, "42 rows", "CodeInterpreter", "Planner")
    context = api.get(f"/api/v1/sessions/{session_id}/context/").json()["messages"]
    assert context == [
        {"role": "system", "content": "You are helpful"},
        {"role": "user", "content": "count the rows of data.csv"},
        {"role": "assistant", "content": "noted"},
        {"role": "assistant", "content": "please count"},
        {"role": "assistant", "content": "42 rows"},
    ]


def test_a_post_can_set_its_chat_role(api, session_id):
    round_id = new_round(api, session_id, "q")["id"]
    created = post(api, session_id, round_id, "from a user proxy", "Proxy", "Planner", role="user")
    assert created["role"] == "user"
    body = {"message": "m", "send_from": "A", "send_to": "B", "role": "tool"}
    refused = api.post(f"{rounds_url(session_id)}{round_id}/posts/", body, format="json")
    assert refused.status_code == 400
    assert "role" in refused.json()["fields"]


def test_a_post_stores_the_time_it_was_said_on_its_message(api, session_id):
    round_id = new_round(api, session_id, "q")["id"]
    dated = post(api, session_id, round_id, "m", "Planner", "User", occurred_at="2025-07-14T18:30:00+02:00")
    undated = post(api, session_id, round_id, "n", "Planner", "User")
    assert Message.objects.get(pk=dated["message_id"]).occurred_at == datetime(2025, 7, 14, 16, 30, tzinfo=UTC)
    assert Message.objects.get(pk=undated["message_id"]).occurred_at is None


@pytest.mark.parametrize(
    ("occurred_at", "problem"),
    [
        ("2025-07-14T18:30:00", "timezone"),  # naive
        ("2025-07-14", "timezone"),  # a bare date is naive too
        ((datetime.now(UTC) + timedelta(days=2)).isoformat(), "future"),
        ("last tuesday", "format"),
    ],
)
def test_a_post_with_a_time_that_is_naive_or_in_the_future_is_refused_naming_the_field(
    api, session_id, occurred_at, problem
):
    round_id = new_round(api, session_id, "q")["id"]
    body = {"message": "m", "send_from": "Planner", "send_to": "User", "occurred_at": occurred_at}
    refused = api.post(f"{rounds_url(session_id)}{round_id}/posts/", body, format="json")
    assert refused.status_code == 400
    assert problem in " ".join(refused.json()["fields"]["occurred_at"]).lower()
    assert not Message.objects.exists()


def test_resending_a_post_with_its_message_id_stores_it_once(api, session_id):
    round_id = new_round(api, session_id, "q")["id"]
    body = {
        "message": "m",
        "send_from": "Planner",
        "send_to": "User",
        "message_id": str(uuid.uuid4()),
        "attachment_list": [{"type": "plan", "content": "1. do it"}],
    }
    first = api.post(f"{rounds_url(session_id)}{round_id}/posts/", body, format="json")
    again = api.post(f"{rounds_url(session_id)}{round_id}/posts/", body, format="json")
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json() == first.json()
    assert Message.objects.count() == 1
    assert Attachment.objects.count() == 1


def test_an_unknown_attachment_type_is_refused_with_its_path(api, session_id):
    round_id = new_round(api, session_id, "q")["id"]
    body = {"message": "m", "send_from": "Planner", "send_to": "User", "attachment_list": [{"type": "init_plan"}]}
    response = api.post(f"{rounds_url(session_id)}{round_id}/posts/", body, format="json")
    assert response.status_code == 400
    assert "attachment_list[0].type" in response.json()["fields"]
    assert Message.objects.count() == 0


def test_every_taskweaver_attachment_type_is_accepted(api, session_id):
    round_id = new_round(api, session_id, "q")["id"]
    attachments = [
        {"type": kind, "content": kind}
        if kind != "shared_memory_entry"
        else {"type": kind, "content": "", "extra": {"type": "plan", "content": "p", "scope": "round"}}
        for kind in ATTACHMENT_TYPES
    ]
    created = post(api, session_id, round_id, "all", "Planner", "User", attachments)
    assert [a["type"] for a in created["attachment_list"]] == list(ATTACHMENT_TYPES)
    assert len(ATTACHMENT_TYPES) == 22


def test_a_shared_memory_attachment_needs_an_entry_in_its_extra(api, session_id):
    round_id = new_round(api, session_id, "q")["id"]
    body = {
        "message": "m",
        "send_from": "Planner",
        "send_to": "User",
        "attachment_list": [{"type": "shared_memory_entry", "extra": {"type": "plan", "scope": "forever"}}],
    }
    response = api.post(f"{rounds_url(session_id)}{round_id}/posts/", body, format="json")
    assert response.status_code == 400
    assert "attachment_list[0].extra" in response.json()["fields"]
    good = {
        **body,
        "attachment_list": [
            {"type": "shared_memory_entry", "extra": {"type": "plan", "content": "x", "scope": "round", "id": "sme-9"}}
        ],
    }
    assert api.post(f"{rounds_url(session_id)}{round_id}/posts/", good, format="json").status_code == 201
    entry = SharedMemoryEntry.objects.get()
    assert (entry.entry_id, entry.created_by, entry.round.round_id, entry.attachment.type) == (
        "sme-9",
        "Planner",
        round_id,
        "shared_memory_entry",
    )


def _conversation(api, session_id):
    """Round 1 finished (User<->Planner, Planner<->CodeInterpreter), round 2 failed
    (Planner<->CodeInterpreter only), round 3 current (User<->Planner)."""
    r1 = new_round(api, session_id, "count rows")["id"]
    post(api, session_id, r1, "count rows", "User", "Planner")
    post(api, session_id, r1, "count them", "Planner", "CodeInterpreter")
    post(api, session_id, r1, "42", "CodeInterpreter", "Planner")
    post(api, session_id, r1, "there are 42", "Planner", "User")
    set_state(api, session_id, r1, "finished")
    r2 = new_round(api, session_id, "plot it")["id"]
    post(api, session_id, r2, "plot", "Planner", "CodeInterpreter")
    post(api, session_id, r2, "ImportError", "CodeInterpreter", "Planner")
    set_state(api, session_id, r2, "failed")
    r3 = new_round(api, session_id, "thanks")["id"]
    post(api, session_id, r3, "thanks", "User", "Planner")
    return r1, r2, r3


def _shape(page: dict) -> list[tuple[str, list[str]]]:
    return [(r["id"], [p["message"] for p in r["post_list"]]) for r in page["results"]]


def test_role_rounds_hold_only_the_roles_posts_and_skip_failed_rounds(api, session_id):
    r1, _, r3 = _conversation(api, session_id)
    coder = api.get(rounds_url(session_id), {"role": "CodeInterpreter"}).json()
    assert _shape(coder) == [(r1, ["count them", "42"]), (r3, [])]
    user = api.get(rounds_url(session_id), {"role": "User", "include_failure_rounds": "false"}).json()
    assert _shape(user) == [(r1, ["count rows", "there are 42"]), (r3, ["thanks"])]


def test_role_rounds_keep_the_rounds_where_the_role_has_no_post(api, session_id):
    r1, r2, r3 = _conversation(api, session_id)
    reviewer = api.get(rounds_url(session_id), {"role": "Reviewer", "include_failure_rounds": "true"}).json()
    assert _shape(reviewer) == [(r1, []), (r2, []), (r3, [])]
    assert [(r["user_query"], r["state"]) for r in reviewer["results"]] == [
        ("count rows", "finished"),
        ("plot it", "failed"),
        ("thanks", "created"),
    ]
    first = api.get(rounds_url(session_id), {"role": "Reviewer", "limit": 1}).json()
    assert _shape(first) == [(r1, [])] and first["next_after"] == 1
    rest = api.get(rounds_url(session_id), {"role": "Reviewer", "after": first["next_after"]}).json()
    assert _shape(rest) == [(r3, [])] and rest["next_after"] is None  # the failed round is left out


def test_role_rounds_include_failed_rounds_when_asked(api, session_id):
    r1, r2, r3 = _conversation(api, session_id)
    coder = api.get(rounds_url(session_id), {"role": "CodeInterpreter", "include_failure_rounds": "true"}).json()
    assert _shape(coder) == [(r1, ["count them", "42"]), (r2, ["plot", "ImportError"]), (r3, [])]
    assert coder["results"][1]["state"] == "failed"
    planner = api.get(rounds_url(session_id), {"role": "Planner", "include_failure_rounds": "true"}).json()
    assert [r["id"] for r in planner["results"]] == [r1, r2, r3]


def test_the_plain_listing_shows_every_round_and_can_leave_failed_ones_out(api, session_id):
    r1, r2, r3 = _conversation(api, session_id)
    assert [r["id"] for r in api.get(rounds_url(session_id)).json()["results"]] == [r1, r2, r3]
    kept = api.get(rounds_url(session_id), {"include_failure_rounds": "false"}).json()
    assert [r["id"] for r in kept["results"]] == [r1, r3]


def test_rounds_page_by_order_in_three_queries_whatever_the_page_holds(api, session_id, django_assert_num_queries):
    r1, r2, r3 = _conversation(api, session_id)
    first = api.get(rounds_url(session_id), {"limit": 2}).json()
    assert [r["id"] for r in first["results"]] == [r1, r2]
    assert first["next_after"] == 2
    rest = api.get(rounds_url(session_id), {"limit": 2, "after": first["next_after"]}).json()
    assert [r["id"] for r in rest["results"]] == [r3]
    session = Session.objects.get(pk=session_id)
    with django_assert_num_queries(3):
        page = round_selectors.round_page(session=session, role="Planner", include_failure_rounds=True)
        assert sum(len(r.posts_read) for r in page.rounds) == 7  # every post of rounds 1-3 but none other


def test_deleting_a_session_deletes_its_rounds_posts_and_attachments(api, admin_api, session_id):
    round_id = new_round(api, session_id, "q")["id"]
    post(api, session_id, round_id, "m", "Planner", "User", [{"type": "plan", "content": "p"}])
    assert admin_api.delete(f"/api/v1/sessions/{session_id}/").status_code == 204
    assert (Round.objects.count(), Message.objects.count(), Attachment.objects.count()) == (0, 0, 0)


@pytest.mark.parametrize("round_id", [".", "..", "%2E", "%2e.", "%2E%2E", "a b", "a/b"])
def test_a_round_id_no_client_could_address_again_is_refused(api, session_id, round_id):
    # HTTP clients decode "%2E" and drop the "." segment: rounds/%2E/posts/ would reach rounds/posts/.
    response = api.post(rounds_url(session_id), {"user_query": "q", "id": round_id}, format="json")
    assert response.status_code == 400 and list(response.json()["fields"]) == ["id"]
    assert api.get(rounds_url(session_id)).json()["results"] == []


def test_a_round_id_with_dots_among_other_characters_is_kept(api, session_id):
    assert new_round(api, session_id, "q", id="%2E.v2")["id"] == "%2E.v2"
