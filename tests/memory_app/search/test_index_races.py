"""An index run racing a user's delete: the run never fails on messages deleted under it (a
foreign key on SQLite, a deadlock on PostgreSQL) and leaves no item of a deleted message."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from memory_app.conversations import services
from memory_app.conversations.models import Message
from memory_app.search import services as search
from memory_app.search.models import IndexRun, SearchItem

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("job_outbox")]


def index_all(team_id: int, outcomes: list[str]) -> None:
    try:
        search.index_request(team_id=team_id)
        for _ in range(20):
            run = IndexRun.objects.filter(team_id=team_id, status=IndexRun.Status.PENDING).first()
            if run is None:
                return
            outcomes.append(search.search_index_execute(run_id=str(run.pk)))
    except Exception as exc:  # the thread reports what it met
        outcomes.append(f"raised {exc!r}")
    finally:
        connection.close()


def test_an_index_run_survives_messages_deleted_under_it(tenant) -> None:
    for attempt in range(6):
        session = services.session_create(team=tenant.team)
        services.message_append(
            session=session,
            messages=[{"role": "user", "content": f"note {n} about the quokka vault"} for n in range(90)],
        )
        outcomes: list[str] = []
        indexer = threading.Thread(target=index_all, args=(tenant.team.pk, outcomes))
        indexer.start()
        if attempt % 2:
            services.session_reset(session=session)
        else:
            for message in list(Message.objects.filter(session=session).order_by("-seq")[:30]):
                services.message_delete(message=message)
        indexer.join(timeout=120)

        assert all(outcome == "done" for outcome in outcomes), outcomes
        live = set(Message.objects.values_list("pk", flat=True))
        orphans = SearchItem.objects.filter(message_id__isnull=False).exclude(message_id__in=live)
        assert not orphans.exists()
