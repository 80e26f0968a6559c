"""Idempotency-Key: a write sent again with the same key gets the first answer back.

A client that lost the response of a write (a dropped connection, a 503 while the database
restarted) cannot tell whether it happened; it re-sends it with the same key. The first
write stores its answer (status and body) under (team, key) in its own transaction, so the
key is recorded exactly when the write committed: a repeat finds it and replays the answer;
a repeat whose first attempt rolled back finds nothing and writes. Concurrent repeats meet
at the unique constraint: the loser rolls back its write and replays the winner's answer.

Client-chosen `message_id`s stay what they are, the messages' identity (re-sending stored
ids without a key still answers 200 with the stored messages); the key is the one retry
mechanism that covers every write, including session creation, which has no client id.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import transaction
from django.utils import timezone

from memory_app.idempotency.models import IdempotencyRecord
from memory_app.tenancy.models import Team
from memsite.errors import IdempotencyKeyReused, InvalidInput

HEADER = "Idempotency-Key"
MAX_KEY_LENGTH = 255


@dataclass(frozen=True)
class StoredResponse:
    status_code: int
    body: Any


def validate_key(key: str) -> str:
    """A key is 1..255 printable ASCII characters (a UUID is the usual choice)."""
    if not key or len(key) > MAX_KEY_LENGTH or not key.isascii() or not key.isprintable():
        raise InvalidInput.for_field(HEADER, f"must be 1 to {MAX_KEY_LENGTH} printable ASCII characters")
    return key


def request_fingerprint(*, method: str, path: str, data: Any) -> str:
    """What makes two requests "the same write": method, path and the parsed body (key order ignored)."""
    canonical = json.dumps([method.upper(), path, data], sort_keys=True, cls=DjangoJSONEncoder, ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def _live(team: Team) -> Any:
    return IdempotencyRecord.objects.filter(
        team=team, created_at__gte=timezone.now() - timedelta(seconds=settings.IDEMPOTENCY_TTL)
    )


def idempotency_lookup(*, team: Team, key: str, fingerprint: str) -> StoredResponse | None:
    """The stored answer for this key, None if there is none; IdempotencyKeyReused when the
    key was used for a different request."""
    record = _live(team).filter(key=key).values("request_hash", "status_code", "response_body").first()
    if record is None:
        return None
    if record["request_hash"] != fingerprint:
        raise IdempotencyKeyReused(
            f"{HEADER} {key!r} was already used for a different request.",
            fields={HEADER: ["already used for a different request (method, path or body)"]},
        )
    return StoredResponse(status_code=record["status_code"], body=record["response_body"])


def idempotency_record(
    *,
    team: Team,
    key: str,
    fingerprint: str,
    session_id: uuid.UUID | str | None,
    status_code: int,
    body: Any,
) -> None:
    """Store the answer; call inside the write's transaction. An expired record of the same
    key is replaced; a live one makes the insert fail (IntegrityError) and the write roll back."""
    IdempotencyRecord.objects.filter(
        team=team, key=key, created_at__lt=timezone.now() - timedelta(seconds=settings.IDEMPOTENCY_TTL)
    ).delete()
    IdempotencyRecord.objects.create(
        team=team,
        key=key,
        request_hash=fingerprint,
        session_id=session_id,
        status_code=status_code,
        # Through JSON, so what is stored is exactly what the first answer said (UUIDs, times as text).
        response_body=json.loads(json.dumps(body, cls=DjangoJSONEncoder)),
    )


@transaction.atomic
def idempotency_purge() -> int:
    """Delete records past IDEMPOTENCY_TTL (a beat job); returns how many."""
    cutoff = timezone.now() - timedelta(seconds=settings.IDEMPOTENCY_TTL)
    deleted, _ = IdempotencyRecord.objects.filter(created_at__lt=cutoff).delete()
    return deleted
