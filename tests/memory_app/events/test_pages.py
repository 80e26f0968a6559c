"""The dashboard's event feed (/events/): the team's events newest first, filtered by type and
session on the server, paginated, each linked to its session and to what it is about."""

from __future__ import annotations

import re
import uuid

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from memory_app.conversations import services
from memory_app.events.models import MemoryEvent
from memory_app.events.services import event_record
from memory_app.tenancy.models import TeamMembership
from tests.conftest import Tenant, make_tenant

Kind = MemoryEvent.Kind


@pytest.fixture
def reader(tenant: Tenant) -> Client:
    user = get_user_model().objects.create_user("ada", password="pw-0123456789")
    TeamMembership.objects.create(team=tenant.team, user=user, is_admin=False)
    client = Client()
    client.force_login(user)
    return client


def record(tenant: Tenant, kind: str, session=None, **data: object) -> MemoryEvent:
    return event_record(team_id=tenant.team.pk, session=session, kind=kind, data=data)


def shown_ids(html: str) -> list[int]:
    return [int(found) for found in re.findall(r'id="event-(\d+)"', html)]


def test_the_feed_shows_the_teams_events_newest_first_and_no_other_teams(tenant: Tenant, reader: Client) -> None:
    session = services.session_create(team=tenant.team, external_id="chat-42")
    older = record(tenant, Kind.IMPORTED, session, messages=3)
    newer = record(tenant, Kind.RESET, session)
    theirs = record(make_tenant("events-other"), Kind.IMPORTED, None)

    response = reader.get("/events/")
    assert response.status_code == 200
    html = response.content.decode()
    assert shown_ids(html) == [newer.pk, older.pk] and theirs.pk not in shown_ids(html)
    assert f'href="/sessions/{session.pk}/"' in html and "chat-42" in html
    assert 'href="/events/" aria-current="page">Events<' in html
    assert "&quot;messages&quot;: 3" in html  # the data, pretty-printed


def test_the_feed_filters_by_type_and_by_session_id_or_external_id(tenant: Tenant, reader: Client) -> None:
    one = services.session_create(team=tenant.team, external_id="one")
    two = services.session_create(team=tenant.team)
    imported = record(tenant, Kind.IMPORTED, one)
    reset = record(tenant, Kind.RESET, one)
    other = record(tenant, Kind.IMPORTED, two)

    assert shown_ids(reader.get("/events/?kind=imported").content.decode()) == [other.pk, imported.pk]
    assert shown_ids(reader.get(f"/events/?session={one.pk}").content.decode()) == [reset.pk, imported.pk]
    assert shown_ids(reader.get("/events/?session=one&kind=reset").content.decode()) == [reset.pk]


def test_a_session_of_another_team_matches_nothing_and_says_so_on_the_field(tenant: Tenant, reader: Client) -> None:
    record(tenant, Kind.IMPORTED, services.session_create(team=tenant.team))
    theirs = services.session_create(team=make_tenant("events-beta").team)
    html = reader.get(f"/events/?session={theirs.pk}").content.decode()
    assert shown_ids(html) == []
    assert 'id="id_session_error"' in html and "No session of this team" in html
    assert 'aria-invalid="true"' in html
    # An unknown type is a field error too, not a server error.
    assert reader.get("/events/?kind=nope").status_code == 200


def test_each_event_links_to_what_it_is_about(tenant: Tenant, reader: Client) -> None:
    session = services.session_create(team=tenant.team)
    run_id, fact_id = uuid.uuid4(), uuid.uuid4()
    record(tenant, Kind.COMPACTION_COMPLETED, session, run_id=str(run_id))
    record(tenant, Kind.FACTS_EXTRACTED, session, run_id=str(run_id))
    record(tenant, Kind.FACT_INVALIDATED, None, fact_id=str(fact_id))
    record(tenant, Kind.EXPERIENCE_APPROVED, None, exp_id="file-checks")
    record(tenant, Kind.RESET, session, run_id="not-an-id")  # free-form data never breaks the page

    html = reader.get("/events/").content.decode()
    assert f'href="/sessions/{session.pk}/#run-{run_id}"' in html
    assert f'href="/facts/extractions/{run_id}/"' in html
    assert f'href="/facts/{fact_id}/"' in html
    assert 'href="/experiences/e/file-checks/"' in html
    assert "team-wide" in html


def test_the_feed_paginates_with_the_filters_kept(tenant: Tenant, reader: Client) -> None:
    session = services.session_create(team=tenant.team)
    MemoryEvent.objects.bulk_create(
        MemoryEvent(team=tenant.team, session=session, kind=Kind.IMPORTED, data={}) for _ in range(55)
    )
    first = reader.get("/events/?kind=imported").content.decode()
    assert len(shown_ids(first)) == 50 and 'href="?kind=imported&amp;page=2"' in first
    assert len(shown_ids(reader.get("/events/?kind=imported&page=2").content.decode())) == 5


def test_the_feed_reads_a_fixed_number_of_queries_whatever_its_length(
    tenant: Tenant, reader: Client, django_assert_max_num_queries
) -> None:
    reader.get("/events/")
    session = services.session_create(team=tenant.team)
    MemoryEvent.objects.bulk_create(
        MemoryEvent(team=tenant.team, session=session, kind=Kind.IMPORTED, data={}) for _ in range(40)
    )
    with django_assert_max_num_queries(10):
        assert reader.get("/events/").status_code == 200
