"""Idempotency-Key on writes: a repeat replays the first answer, a different body is refused."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.db import OperationalError
from django.utils import timezone

from memory_app.compaction.models import CompactionRun
from memory_app.conversations.models import Message, Session
from memory_app.idempotency import services as idempotency
from memory_app.idempotency.models import IdempotencyRecord

pytestmark = pytest.mark.django_db


def post(api, path: str, body: dict, key: str | None):
    headers = {"HTTP_IDEMPOTENCY_KEY": key} if key is not None else {}
    return api.post(path, body, format="json", **headers)


def test_a_repeated_append_with_the_same_key_replays_the_answer_and_stores_once(api, session_id):
    path = f"/api/v1/sessions/{session_id}/messages/"
    first = post(api, path, {"role": "user", "content": "once"}, "key-1")
    again = post(api, path, {"role": "user", "content": "once"}, "key-1")

    assert first.status_code == again.status_code == 201
    assert again.json() == first.json()
    assert again["Idempotent-Replayed"] == "true"
    assert Message.objects.filter(session_id=session_id).count() == 1


def test_a_repeated_batch_with_the_same_key_is_stored_once(api, session_id):
    path = f"/api/v1/sessions/{session_id}/messages/"
    batch = {"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]}
    first = post(api, path, batch, "batch-key")
    again = post(api, path, batch, "batch-key")

    assert again.json() == first.json()
    assert [m["seq"] for m in again.json()["messages"]] == [1, 2]
    assert Message.objects.filter(session_id=session_id).count() == 2


def test_a_repeated_session_create_with_the_same_key_creates_one_session(api, tenant):
    first = post(api, "/api/v1/sessions/", {"system_prompt": "s"}, "create-1")
    again = post(api, "/api/v1/sessions/", {"system_prompt": "s"}, "create-1")

    assert (first.status_code, again.status_code) == (201, 201)
    assert again.json()["id"] == first.json()["id"]
    assert Session.objects.filter(team=tenant.team).count() == 1


def test_the_same_key_with_a_different_body_is_refused_and_writes_nothing(api, session_id):
    path = f"/api/v1/sessions/{session_id}/messages/"
    post(api, path, {"role": "user", "content": "first"}, "key-2")
    other = post(api, path, {"role": "user", "content": "second"}, "key-2")

    assert other.status_code == 422
    assert other.json()["error"] == "idempotency_key_reused"
    assert list(other.json()["fields"]) == ["Idempotency-Key"]
    assert list(Message.objects.filter(session_id=session_id).values_list("content", flat=True)) == ["first"]


def test_keys_are_per_team(api, other_tenant, session_id):
    post(api, "/api/v1/sessions/", {"system_prompt": "s"}, "shared-key")
    theirs = post(other_tenant.client, "/api/v1/sessions/", {"system_prompt": "s"}, "shared-key")

    assert theirs.status_code == 201
    assert Session.objects.filter(team=other_tenant.team).count() == 1


def test_without_a_key_every_request_writes(api, session_id):
    path = f"/api/v1/sessions/{session_id}/messages/"
    post(api, path, {"role": "user", "content": "x"}, None)
    post(api, path, {"role": "user", "content": "x"}, None)
    assert Message.objects.filter(session_id=session_id).count() == 2
    assert not IdempotencyRecord.objects.exists()


def test_a_refused_write_stores_no_key_and_can_be_sent_again(api, session_id):
    path = f"/api/v1/sessions/{session_id}/messages/"
    bad = post(api, path, {"role": "tool", "content": "x", "tool_call_id": "nope"}, "key-3")
    assert bad.status_code == 400
    assert not IdempotencyRecord.objects.exists()


def test_an_overlong_key_is_refused_naming_the_header(api, session_id):
    response = post(api, f"/api/v1/sessions/{session_id}/messages/", {"role": "user", "content": "x"}, "k" * 256)
    assert response.status_code == 400
    assert list(response.json()["fields"]) == ["Idempotency-Key"]
    assert not Message.objects.exists()


def test_an_expired_key_counts_as_new_and_is_purged(api, session_id, settings):
    path = f"/api/v1/sessions/{session_id}/messages/"
    post(api, path, {"role": "user", "content": "x"}, "old-key")
    IdempotencyRecord.objects.update(created_at=timezone.now() - timedelta(seconds=settings.IDEMPOTENCY_TTL + 5))
    assert post(api, path, {"role": "user", "content": "x"}, "old-key").status_code == 201
    assert Message.objects.filter(session_id=session_id).count() == 2

    IdempotencyRecord.objects.update(created_at=timezone.now() - timedelta(seconds=settings.IDEMPOTENCY_TTL + 5))
    assert idempotency.idempotency_purge() == 1


def test_deleting_the_session_deletes_its_stored_answers(api, admin_api, session_id):
    post(api, f"/api/v1/sessions/{session_id}/messages/", {"role": "user", "content": "x"}, "del-key")
    assert IdempotencyRecord.objects.exists()
    assert admin_api.delete(f"/api/v1/sessions/{session_id}/").status_code == 204
    assert not IdempotencyRecord.objects.exists()


def test_a_database_error_answers_json_503_with_retry_after(api, session_id, monkeypatch):
    def broken(**_: object) -> None:
        raise OperationalError("terminating connection due to administrator command")

    monkeypatch.setattr("memory_app.conversations.services.message_append_to", broken)
    response = post(api, f"/api/v1/sessions/{session_id}/messages/", {"role": "user", "content": "x"}, None)
    assert response.status_code == 503
    assert response.json()["error"] == "database_unavailable"
    assert response["Retry-After"] == "1"


def test_a_database_error_outside_the_api_answers_json_503(client, monkeypatch):
    def broken(*_: object, **__: object) -> None:
        raise OperationalError("connection refused")

    monkeypatch.setattr("django.contrib.auth.views.LoginView.get", broken)
    response = client.get("/accounts/login/")
    assert response.status_code == 503
    assert response.json()["error"] == "database_unavailable"


def test_a_broker_that_refuses_connections_leaves_the_run_pending_and_the_write_succeeds(
    api, monkeypatch, django_capture_on_commit_callbacks
):
    from kombu.exceptions import OperationalError as BrokerError

    attempts: list[object] = []

    def refuse(*args: object, **__: object) -> None:
        attempts.append(args)
        raise BrokerError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    monkeypatch.setattr("memory_app.tasks.compact_session.apply_async", refuse)
    session = post(
        api,
        "/api/v1/sessions/",
        {"memory_type": "managed_conversation", "memory_config": {"threshold_tokens": 10}},
        None,
    ).json()
    with django_capture_on_commit_callbacks(execute=True):
        response = post(
            api, f"/api/v1/sessions/{session['id']}/messages/", {"role": "user", "content": "words " * 40}, None
        )
    assert response.status_code == 201
    assert len(attempts) == 1  # the send was attempted, failed, and did not fail the request
    assert CompactionRun.objects.get(session_id=session["id"]).status == CompactionRun.Status.PENDING
    assert uuid.UUID(response.json()["message_id"])
