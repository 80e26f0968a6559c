"""A live server, a tenant with a key, and MemoryManagers that talk to it over real HTTP."""

from __future__ import annotations

import base64
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connections

from memory_app.compaction.services import compaction_execute
from memory_client import MemoryManager
from tests.conftest import Tenant, make_tenant

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


class InlineWorker:
    """Stands in for the Celery worker: gets the run ids the server sends and runs them in-process.

    With `background = True` each run starts on its own thread as soon as it is sent (after the
    server's commit), like a real worker; otherwise the test calls run_pending() when it wants.
    """

    def __init__(self) -> None:
        self.sent: list[str] = []
        self.results: dict[str, str] = {}
        self.background = False
        self._threads: list[threading.Thread] = []

    def send(self, run_id: Any, countdown: float = 0) -> None:
        self.sent.append(str(run_id))
        if self.background:
            thread = threading.Thread(target=self._run_on_thread, args=(str(run_id),), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _run_on_thread(self, run_id: str) -> None:
        try:
            self.results[run_id] = compaction_execute(run_id=run_id)
        finally:
            connections.close_all()  # this thread's connection, so the test database can be flushed

    def run_pending(self) -> list[str]:
        """Execute every sent run not yet executed (in send order); their status strings."""
        todo = [run_id for run_id in self.sent if run_id not in self.results]
        for run_id in todo:
            self.results[run_id] = compaction_execute(run_id=run_id)
        return [self.results[run_id] for run_id in todo]

    def join(self) -> None:
        for thread in self._threads:
            thread.join(timeout=30)


@pytest.fixture
def worker(monkeypatch: pytest.MonkeyPatch, live_server: Any) -> Iterator[InlineWorker]:
    """Compaction runs the live server queues go here instead of to a broker."""
    inline = InlineWorker()
    monkeypatch.setattr("memory_app.compaction.services._send", inline.send)
    yield inline
    inline.join()


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
