"""Deleting a session or a team removes every trace: a canary written into every field is
absent from a full dump of the database afterwards (pg_dump on PostgreSQL, every table on SQLite)."""

from __future__ import annotations

import subprocess

import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.auth import get_user_model
from django.db import connection
from rest_framework.test import APIClient

from experiences_app.models import Experience, SelectionLog
from memory_app.conversations import services
from memory_app.tenancy import services as tenancy
from memory_app.tenancy.models import Team
from tests.conftest import make_tenant
from tests.security.canary_data import admin_client_of, fill_session, fill_team

pytestmark = pytest.mark.django_db(transaction=True)

SESSION_CANARY = "CANARYsess7Q4xZ"
TEAM_CANARY = "CANARYteam9K2wV"


def database_dump() -> str:
    """Every row of every table, as text, as the database itself holds it."""
    if connection.vendor == "postgresql":
        db = connection.settings_dict
        command = ["pg_dump", "--data-only", "--no-owner", "-d", db["NAME"]]
        for flag, key in (("-h", "HOST"), ("-p", "PORT"), ("-U", "USER")):
            if db.get(key):
                command += [flag, str(db[key])]
        env = {"PGPASSWORD": str(db.get("PASSWORD") or ""), "PATH": "/usr/bin:/bin"}
        return subprocess.run(command, check=True, capture_output=True, text=True, env=env, timeout=120).stdout
    connection.ensure_connection()
    return "\n".join(connection.connection.iterdump())


def full_text_index_holds(canary: str) -> bool:
    """SQLite's FTS5 keeps terms in binary segments (hex in a dump): look inside them. PostgreSQL's
    tsvector is a column of the item row, gone with it."""
    if connection.vendor != "sqlite":
        return False
    with connection.cursor() as cursor:
        cursor.execute("SELECT block FROM memory_app_searchitem_fts_data")
        return any(canary.lower().encode() in bytes(block or b"") for (block,) in cursor.fetchall())


def tables_containing(dump: str, canary: str) -> set[str]:
    """The tables whose rows hold the canary (COPY blocks on PostgreSQL, INSERTs on SQLite)."""
    found: set[str] = set()
    current = ""
    for line in dump.splitlines():
        if line.startswith("COPY "):
            current = line.split()[1].split(".")[-1].strip('"')
        elif line.startswith("INSERT INTO "):
            current = line.split()[2].strip('"')
        if canary in line:
            found.add(current)
    return found


@pytest.fixture
def llm(llm_server, settings):
    return llm_server


@pytest.fixture(autouse=True)
def no_broker(job_outbox: list) -> None:
    """The test runs the jobs itself (the worker's own service calls); nothing goes to a broker."""


# Tables a full session must have written the canary into, so an empty dump cannot pass.
SESSION_TABLES = {
    "memory_app_session",
    "memory_app_message",
    "memory_app_round",
    "memory_app_attachment",
    "memory_app_sharedmemoryentry",
    "memory_app_agentmemory",
    "memory_app_agentmemoryentry",
    "memory_app_compactionrun",
    "memory_app_fact",
    "memory_app_factextractionrun",
    "experiences_app_selectionlog",
    "memory_app_searchitem",  # recall's index: the text of messages, facts, records, summaries ...
}


def test_deleting_a_session_through_the_api_leaves_no_trace_in_the_database(tenant, settings, llm) -> None:
    admin = admin_client_of(tenant.team)
    filled = fill_session(
        client=tenant.client, admin=admin, team=tenant.team, canary=SESSION_CANARY, settings=settings, llm_server=llm
    )
    before = tables_containing(database_dump(), SESSION_CANARY)
    assert SESSION_TABLES <= before, sorted(SESSION_TABLES - before)
    assert full_text_index_holds(SESSION_CANARY) == (connection.vendor == "sqlite")
    # A second session of the same team stays untouched.
    keep = tenant.client.post("/api/v1/sessions/", {"system_prompt": "KEEPME"}, format="json").json()["id"]

    response = admin.delete(f"/api/v1/sessions/{filled.session_id}/")

    assert response.status_code == 204, response.content
    dump = database_dump()
    assert tables_containing(dump, SESSION_CANARY) == set()
    assert not full_text_index_holds(SESSION_CANARY)
    assert "KEEPME" in dump and tenant.team.sessions.filter(pk=keep).exists()
    assert Experience.objects.filter(team=tenant.team, exp_id="canary-exp").exists()  # team data stays


def test_a_selection_log_goes_with_its_session(tenant, settings, llm) -> None:
    filled = fill_session(
        client=tenant.client,
        admin=admin_client_of(tenant.team),
        team=tenant.team,
        canary=SESSION_CANARY,
        settings=settings,
        llm_server=llm,
    )
    assert SelectionLog.objects.filter(session_id=filled.session_id).count() == 1
    services.session_delete(session=tenant.team.sessions.get(pk=filled.session_id))
    assert SelectionLog.objects.filter(team=tenant.team).count() == 0


def _fill_whole_team(tenant, settings, llm) -> None:
    admin = admin_client_of(tenant.team)
    fill_session(
        client=tenant.client, admin=admin, team=tenant.team, canary=TEAM_CANARY, settings=settings, llm_server=llm
    )
    fill_team(team=tenant.team, admin=admin, canary=TEAM_CANARY)


def test_deleting_a_team_through_the_service_leaves_no_trace(settings, llm) -> None:
    tenant = make_tenant(f"team-{TEAM_CANARY}")
    other = make_tenant("bystander")
    other.client.post("/api/v1/sessions/", {"system_prompt": "BYSTANDER"}, format="json")
    _fill_whole_team(tenant, settings, llm)
    before = tables_containing(database_dump(), TEAM_CANARY)
    assert SESSION_TABLES | {"memory_app_team", "memory_app_apikey", "experiences_app_experience"} <= before
    assert {"experiences_app_experiencerevision", "experiences_app_teamexperienceconfig"} <= before

    tenancy.team_delete(team=tenant.team)

    dump = database_dump()
    assert tables_containing(dump, TEAM_CANARY) == set()
    assert "BYSTANDER" in dump


def test_deleting_a_team_in_the_admin_leaves_no_trace_not_even_in_the_admin_log(settings, llm) -> None:
    tenant = make_tenant(f"team-{TEAM_CANARY}")
    _fill_whole_team(tenant, settings, llm)
    user = get_user_model().objects.create_superuser("root", "root@example.com", "a-long-admin-password-1")
    # What the admin writes when someone edits the team's rows: lines naming them.
    LogEntry.objects.log_actions(
        user_id=user.pk,
        queryset=[tenant.team, Experience.objects.get(team=tenant.team, exp_id="team-canary")],
        action_flag=CHANGE,
    )
    browser = APIClient()
    browser.force_login(user)

    response = browser.post(f"/admin/memory_app/team/{tenant.team.pk}/delete/", {"post": "yes"})

    assert response.status_code == 302, response.content[:500]
    assert not Team.objects.filter(pk=tenant.team.pk).exists()
    assert tables_containing(database_dump(), TEAM_CANARY) == set()
    assert LogEntry.objects.filter(object_repr=f"team #{tenant.team.pk}").exists()  # the deletion is on record
