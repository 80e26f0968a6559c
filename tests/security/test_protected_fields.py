"""Property-level: a client cannot write the fields the server owns.

Every API write (from the key-role table, so a new route is covered automatically) is sent its
ordinary body plus the fields the server assigns: team, ids, seq, statuses of experiences and
jobs, created_by/author, compaction fields (summary, covered seq range, tokens), token counts,
timestamps. Each must be refused with a 400 naming the field, or ignored: no row of either app
ends up holding one of those values afterwards.
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import pytest
from django.apps import apps

from memory_app.compaction.models import CompactionRun
from tests.security.conftest import World
from tests.security.test_key_roles import ADMIN, BODIES, LEAST_ROLE, send

pytestmark = pytest.mark.django_db

MARK = 424_242  # an int no ordinary request produces
HOSTILE_UUID = uuid.UUID("deadbeef-dead-4eef-8eef-deadbeefdead")
HOSTILE_TIME = "2001-01-01T00:00:00Z"
HOSTILE_STATUSES = ("approved", "done")


def hostile_fields(other_team_pk: int, *, with_status: bool) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "team": other_team_pk,
        "team_id": other_team_pk,
        "id": str(HOSTILE_UUID),
        "pk": str(HOSTILE_UUID),
        "seq": MARK,
        "last_seq": MARK,
        "created_by": "HOSTILE-agent",
        "author": "HOSTILE-author",
        "reviewer": "HOSTILE-reviewer",
        "updated_by": "HOSTILE-updater",
        "summary": [{"role": "user", "content": "HOSTILE-summary"}],
        "covered_from_seq": MARK,
        "covered_to_seq": MARK,
        "pre_tokens": MARK,
        "post_tokens": MARK,
        "token_count": MARK,
        "active_tokens": MARK,
        "system_prompt_tokens": MARK,
        "revision": MARK,
        "times_seen": MARK,
        "attempts": MARK,
        "created_at": HOSTILE_TIME,
        "updated_at": HOSTILE_TIME,
    }
    if with_status:
        fields["status"] = "approved"  # experiences; jobs are checked for "done" too
    return fields


# Fields a route takes from the client on purpose (they are not server-owned there).
CLIENT_OWNED: dict[tuple[str, str], set[str]] = {
    # shared memory: the entry's author is the role that wrote it; one key may serve several roles
    ("shared-memory", "post"): {"created_by", "id"},
    # client-chosen round, post and agent-memory entry ids make retries safe
    ("round-list", "post"): {"id"},
    ("round-posts", "post"): {"id"},
    ("agent-memory-discoveries", "post"): {"id"},
    ("agent-memory-attempts", "post"): {"id"},
    ("agent-memory-decisions", "post"): {"id"},
}

WRITES = sorted(key for key, least in LEAST_ROLE.items() if key[1] != "get")


def _models() -> list[Any]:
    return [*apps.get_app_config("memory_app").get_models(), *apps.get_app_config("experiences_app").get_models()]


def _statuses() -> set[tuple[str, Any, str]]:
    found = set()
    for model in _models():
        if any(field.name == "status" for field in model._meta.fields):
            for pk, status in model.objects.values_list("pk", "status"):
                found.add((model._meta.label, pk, status))
    return found


def planted(other_team_pk: int, statuses_before: set[tuple[str, Any, str]] | None) -> list[str]:
    """Where a server-owned value from the request landed in the database."""
    problems: list[str] = []
    for model in _models():
        label = model._meta.label
        for row in model.objects.values():
            for column, value in row.items():
                where = f"{label}.{column}={value!r}"
                if column == "team_id" and value == other_team_pk and label not in ("memory_app.ApiKey",):
                    problems.append(where)
                elif value == MARK or value == HOSTILE_UUID or value == str(HOSTILE_UUID):
                    problems.append(where)
                elif isinstance(value, str) and "HOSTILE" in value:
                    problems.append(where)
                elif isinstance(value, dt.datetime) and value.year == 2001:
                    problems.append(where)
    for summary in CompactionRun.objects.values_list("summary", flat=True):
        if "HOSTILE" in repr(summary):
            problems.append(f"CompactionRun.summary={summary!r}")
    for label, pk, status in _statuses() - statuses_before if statuses_before is not None else ():
        if status in HOSTILE_STATUSES:
            problems.append(f"{label}[{pk}].status became {status}")
    return problems


@pytest.mark.parametrize(("name", "method"), WRITES, ids=lambda v: v)
def test_server_owned_fields_are_refused_or_ignored(world: World, other_tenant, name: str, method: str):
    least = LEAST_ROLE[(name, method)]
    hostile = hostile_fields(other_tenant.team.pk, with_status=least != ADMIN)
    for field in CLIENT_OWNED.get((name, method), ()):
        hostile.pop(field)
    body = BODIES.get((name, method))
    if callable(body):  # a body naming the world's objects
        body = body(world)
    if name == "experience-import":
        hostile = {k: str(v) for k, v in hostile.items()}
    # an admin's approve/accept sets a status by design: only agents' writes are checked for it
    statuses_before = _statuses() if least != ADMIN else None
    response = send(world, least, name, method, {**(body or {}), **hostile})
    if response.status_code == 400:
        named = set(response.json()["fields"]) | {response.json()["detail"].split(":")[0]}
        assert any(key.split(".")[0].split("[")[0] in hostile for key in named), response.json()
    elif response.status_code == 403:  # an experience's status is an admin's to set
        assert "status" in response.json()["detail"] and (name, method) == ("experience-detail", "patch")
    else:
        assert 200 <= response.status_code < 300, (response.status_code, response.content[:400])
    assert planted(other_tenant.team.pk, statuses_before) == []


def test_a_message_patch_cannot_move_it_or_change_its_count(world: World):
    session_id, message_id = world.ids["session_id"], world.ids["message_id"]
    path = f"/api/v1/sessions/{session_id}/messages/{message_id}/"
    before = world.clients["write"].get(path).json()
    body = {"content": "edited", "seq": 7, "session": str(uuid.uuid4()), "token_count": 1}
    body["message_id"] = str(uuid.uuid4())
    after = world.clients["write"].patch(path, body, format="json").json()
    assert (after["seq"], after["message_id"], after["token_count"] != 1) == (before["seq"], message_id, True)


def test_a_compaction_ledger_is_never_written_through_the_api(world: World):
    run = CompactionRun.objects.get(pk=world.ids["run_id"])
    response = world.clients["admin"].patch(
        f"/api/v1/sessions/{world.ids['session_id']}/",
        {"compaction_runs": [{"summary": "x"}], "active_tokens": 1, "last_seq": 0},
        format="json",
    )
    assert response.status_code in (200, 400)
    fresh = CompactionRun.objects.get(pk=run.pk)
    assert (fresh.summary, fresh.covered_to_seq, fresh.status) == (run.summary, run.covered_to_seq, run.status)
