"""`occurred_at`: the time a message was said, given by its writer (an imported history's dates),
beside `created_at`, the time it was stored."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from rest_framework.test import APIClient

from memory_app.conversations.models import Message

pytestmark = pytest.mark.django_db

LAST_JULY = "2025-07-14T18:30:00+02:00"


def messages_url(session_id: str) -> str:
    return f"/api/v1/sessions/{session_id}/messages/"


def stored_times(session_id: str) -> list[Any]:
    return list(Message.objects.filter(session_id=session_id).order_by("seq").values_list("occurred_at", flat=True))


def test_an_appended_message_keeps_the_time_it_was_said(api: APIClient, session_id: str) -> None:
    response = api.post(
        messages_url(session_id), {"role": "user", "content": "went hiking", "occurred_at": LAST_JULY}, format="json"
    )
    assert response.status_code == 201, response.content

    listed = api.get(messages_url(session_id)).json()["results"][0]
    assert parse_datetime(listed["occurred_at"]) == parse_datetime(LAST_JULY)
    assert parse_datetime(listed["created_at"]) > parse_datetime(LAST_JULY)  # the storage time is its own
    assert stored_times(session_id) == [parse_datetime(LAST_JULY)]


def test_a_message_without_a_time_reads_it_as_null(api: APIClient, session_id: str) -> None:
    api.post(messages_url(session_id), {"role": "user", "content": "hi"}, format="json")

    listed = api.get(messages_url(session_id)).json()["results"][0]
    assert listed["occurred_at"] is None
    assert listed["created_at"] is not None


def test_a_batch_append_keeps_each_messages_time(api: APIClient, session_id: str) -> None:
    body = {
        "messages": [
            {"role": "user", "content": "a", "occurred_at": "2025-07-01T09:00:00Z"},
            {"role": "assistant", "content": "b"},
            {"role": "user", "content": "c", "occurred_at": "2025-07-02T09:00:00-05:00"},
        ]
    }
    response = api.post(messages_url(session_id), body, format="json")
    assert response.status_code == 201, response.content

    assert stored_times(session_id) == [
        parse_datetime("2025-07-01T09:00:00Z"),
        None,
        parse_datetime("2025-07-02T14:00:00Z"),
    ]


@pytest.mark.parametrize(
    ("occurred_at", "error"),
    [
        ("2025-07-14T18:30:00", "must include a timezone"),
        ("last July", "Datetime has wrong format"),
        ("2025-07-14", "must include a timezone"),
        (12345, "Datetime has wrong format"),
    ],
)
def test_it_refuses_a_time_without_a_timezone_or_not_a_time(
    api: APIClient, session_id: str, occurred_at: Any, error: str
) -> None:
    response = api.post(
        messages_url(session_id), {"role": "user", "content": "x", "occurred_at": occurred_at}, format="json"
    )

    assert response.status_code == 400
    assert "occurred_at" in response.json()["fields"]
    assert error in str(response.json()["fields"]["occurred_at"])
    assert not Message.objects.filter(session_id=session_id).exists()


def test_it_refuses_a_time_more_than_a_day_ahead(api: APIClient, session_id: str) -> None:
    later = (timezone.now() + timedelta(days=1, minutes=5)).isoformat()
    soon = (timezone.now() + timedelta(hours=20)).isoformat()

    refused = api.post(messages_url(session_id), {"role": "user", "content": "x", "occurred_at": later}, format="json")
    assert refused.status_code == 400
    assert "in the future" in str(refused.json()["fields"]["occurred_at"])
    assert not Message.objects.filter(session_id=session_id).exists()

    accepted = api.post(messages_url(session_id), {"role": "user", "content": "x", "occurred_at": soon}, format="json")
    assert accepted.status_code == 201, accepted.content


def test_a_bad_time_in_a_batch_stores_none_of_it(api: APIClient, session_id: str) -> None:
    body = {
        "messages": [
            {"role": "user", "content": "a", "occurred_at": LAST_JULY},
            {"role": "user", "content": "b", "occurred_at": "2025-07-14T18:30:00"},
        ]
    }
    response = api.post(messages_url(session_id), body, format="json")

    assert response.status_code == 400
    assert "messages[1].occurred_at" in response.json()["fields"]
    assert not Message.objects.filter(session_id=session_id).exists()


def test_a_retry_with_another_time_is_not_a_replay(api: APIClient, session_id: str) -> None:
    message = {"message_id": "0c7d6a1e-5f0e-4c55-9a53-3f1d6b2f4e01", "role": "user", "content": "a"}
    first = api.post(messages_url(session_id), {**message, "occurred_at": LAST_JULY}, format="json")
    again = api.post(messages_url(session_id), {**message, "occurred_at": LAST_JULY}, format="json")
    other = api.post(messages_url(session_id), {**message, "occurred_at": "2025-07-15T00:00:00Z"}, format="json")

    assert (first.status_code, again.status_code) == (201, 200)
    assert other.status_code == 422  # the id names a stored message with another time
    assert stored_times(session_id) == [parse_datetime(LAST_JULY)]


def test_a_message_edit_may_correct_its_time(api: APIClient, session_id: str) -> None:
    message_id = api.post(messages_url(session_id), {"role": "user", "content": "a"}, format="json").json()[
        "message_id"
    ]

    edited = api.patch(f"{messages_url(session_id)}{message_id}/", {"occurred_at": LAST_JULY}, format="json")

    assert edited.status_code == 200, edited.content
    assert parse_datetime(edited.json()["occurred_at"]) == parse_datetime(LAST_JULY)
    assert stored_times(session_id) == [parse_datetime(LAST_JULY)]


def test_an_export_round_trips_the_times(api: APIClient, session_id: str) -> None:
    body = {
        "messages": [
            {"role": "user", "content": "a", "occurred_at": LAST_JULY},
            {"role": "assistant", "content": "b"},
        ]
    }
    api.post(messages_url(session_id), body, format="json")

    exported = api.get(f"/api/v1/sessions/{session_id}/export/").json()
    times = [m.get("occurred_at") for m in exported["messages"] if m["role"] != "system"]
    assert parse_datetime(times[0]) == parse_datetime(LAST_JULY)
    assert times[1] is None  # absent, like every other unset field

    imported = api.post("/api/v1/sessions/import/", exported, format="json")
    assert imported.status_code == 201, imported.content
    assert stored_times(imported.json()["id"]) == [parse_datetime(LAST_JULY), None]


def test_an_import_keeps_a_dated_history(api: APIClient) -> None:
    document = {
        "messages": [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "I adopted a cat", "occurred_at": "2023-05-08T13:56:00+00:00"},
            {"role": "assistant", "content": "Congratulations!", "occurred_at": "2023-05-08T13:57:00+00:00"},
        ]
    }
    imported = api.post("/api/v1/sessions/import/", document, format="json")

    assert imported.status_code == 201, imported.content
    assert stored_times(imported.json()["id"]) == [
        parse_datetime("2023-05-08T13:56:00Z"),
        parse_datetime("2023-05-08T13:57:00Z"),
    ]


def test_an_import_with_a_naive_time_creates_nothing(api: APIClient) -> None:
    document = {"messages": [{"role": "user", "content": "a", "occurred_at": "2023-05-08T13:56:00"}]}
    before = Message.objects.count()

    refused = api.post("/api/v1/sessions/import/", document, format="json")

    assert refused.status_code == 400
    assert "must include a timezone" in str(refused.json())
    assert Message.objects.count() == before
