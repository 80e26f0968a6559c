"""The archive job on a real Celery worker process (the broker and database the tests run on)."""

from __future__ import annotations

import pytest

from memory_app.agent_records import services as agent_memory
from memory_app.agent_records.models import AgentMemoryEntry
from memory_app.conversations import services
from memory_app.tasks import archive_agent_memories
from tests.conftest import make_tenant
from tests.worker_process import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_a_worker_archives_a_long_memory(start_worker):
    tenant = make_tenant("archive-worker")
    session = services.session_create(team=tenant.team, system_prompt="")
    document = {
        "version": "1",
        "schema": "agent-memory",
        "discoveries": [
            {
                "id": f"discovery-00{hour}",
                "timestamp": f"2026-01-23T0{hour}:00:00.000Z",
                "type": "code_pattern",
                "content": f"pattern {hour}",
            }
            for hour in (1, 2, 7)
        ],
    }
    agent_memory.agent_memory_replace(session=session, agent="developer", document=document)
    start_worker()
    archive_agent_memories.apply_async()
    archived = AgentMemoryEntry.objects.filter(archived_at__isnull=False)
    wait_for(lambda: archived.count() == 2, timeout=60, what="the archive job")
    assert sorted(archived.values_list("entry_id", flat=True)) == ["discovery-001", "discovery-002"]
