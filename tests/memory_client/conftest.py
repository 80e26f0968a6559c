"""A live server, a tenant with a key, and MemoryManagers that talk to it over real HTTP."""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from memory_app.compaction import services as compaction
from memory_app.jobs import JobKind
from memory_app.search import services as search_index
from memory_client import MemoryManager
from tests.conftest import Tenant, make_tenant
from tests.job_dispatch import InlineWorker

# A real 1x1 PNG: the server checks the magic bytes of every data URL.
PNG_BYTES = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)
PNG_DATA_URL = "data:image/png;base64," + base64.b64encode(PNG_BYTES).decode()


@pytest.fixture
def client_tenant(transactional_db: None) -> Tenant:
    return make_tenant("client-alpha")


@pytest.fixture
def server_url(live_server: Any) -> str:
    return live_server.url


@pytest.fixture
def make_memory(server_url: str, client_tenant: Tenant) -> Iterator[Callable[..., MemoryManager]]:
    """Build MemoryManagers against the live server; every one is closed at teardown."""
    made: list[MemoryManager] = []

    def make(*args: Any, **kwargs: Any) -> MemoryManager:
        kwargs.setdefault("base_url", server_url)
        kwargs.setdefault("api_key", client_tenant.key)
        manager = MemoryManager(*args, **kwargs)
        made.append(manager)
        return manager

    yield make
    for manager in made:
        manager.close()


@pytest.fixture
def png_path(tmp_path: Path) -> Path:
    path = tmp_path / "pixel.png"
    path.write_bytes(PNG_BYTES)
    return path


@pytest.fixture
def worker(run_jobs_inline: Callable[[JobKind], InlineWorker], live_server: Any) -> InlineWorker:
    """Compaction runs the live server queues go here instead of to a broker."""
    return run_jobs_inline(compaction.JOB)


@pytest.fixture
def indexer(run_jobs_inline: Callable[[JobKind], InlineWorker], live_server: Any) -> Callable[[], None]:
    """Index everything written so far: run the index jobs the server queued, and their follow-ups."""
    worker = run_jobs_inline(search_index.JOB)

    def index() -> None:
        while worker.run_pending():
            pass

    return index


class RecordingBus:
    """An event bus as set_event_context needs one: anything with emit_nowait."""

    def __init__(self) -> None:
        self.events: list[Any] = []

    def emit_nowait(self, event: Any) -> None:
        self.events.append(event)

    def of_type(self, name: str) -> list[Any]:
        return [event for event in self.events if type(event).__name__ == name]


@pytest.fixture
def bus() -> RecordingBus:
    return RecordingBus()
