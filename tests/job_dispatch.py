"""Test dispatchers for the job lifecycle, selected by `settings.JOB_DISPATCHER` (fixtures in
tests/conftest.py): one kind's sends read from the recording outbox, and an in-process worker
that runs the jobs a live server queues.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from django.db import connections
from django.utils.module_loading import import_string

from memory_app.jobs import JobKind
from memory_app.jobs.dispatchers import RecordingDispatcher, Sent


class Sends(Sequence[tuple[str, float]]):
    """The (job id, countdown) of each send of one kind in the recording outbox, in send order.

    Read live, so a test holding it sees every later send; other kinds' sends in the same
    outbox are left out, as when each kind was recorded on its own.
    """

    def __init__(self, outbox: list[Sent], kind: JobKind) -> None:
        self._outbox = outbox
        self._task = kind.task

    def _current(self) -> list[tuple[str, float]]:
        return [(sent.job_id, sent.countdown) for sent in self._outbox if sent.task == self._task]

    def __getitem__(self, index: Any) -> Any:
        return self._current()[index]

    def __len__(self) -> int:
        return len(self._current())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and self._current() == list(other)

    __hash__ = None  # type: ignore[assignment]  # mutable, compared by content

    def __repr__(self) -> str:
        return repr(self._current())

    @property
    def ids(self) -> list[str]:
        return [job_id for job_id, _ in self._current()]

    def clear(self) -> None:
        """Forget this kind's sends so far (the outbox keeps the others)."""
        self._outbox[:] = [sent for sent in self._outbox if sent.task != self._task]


class InlineWorker:
    """Stands in for the Celery worker of one job kind: gets the ids the server sends and runs
    their task in-process.

    With `background = True` each job starts on its own thread as soon as it is sent (after the
    server's commit), like a real worker; otherwise the test calls run_pending() or
    start_pending() when it wants.
    """

    def __init__(self, kind: JobKind) -> None:
        self.task = import_string(kind.task)  # the task's body runs as a worker would run it
        self.sent: list[str] = []
        self.results: dict[str, str] = {}
        self.background = False
        self._threads: list[threading.Thread] = []

    def send(self, job_id: str) -> None:
        self.sent.append(job_id)
        if self.background:
            self._start(job_id)

    def _start(self, job_id: str) -> None:
        thread = threading.Thread(target=self._run_on_thread, args=(job_id,), daemon=True)
        self._threads.append(thread)
        thread.start()

    def _run_on_thread(self, job_id: str) -> None:
        try:
            self.results[job_id] = self.task(job_id)
        finally:
            connections.close_all()  # this thread's connection, so the test database can be flushed

    def _not_run(self) -> list[str]:
        return [job_id for job_id in self.sent if job_id not in self.results]

    def run_pending(self) -> list[str]:
        """Execute every sent job not yet executed (in send order); their status strings."""
        todo = self._not_run()
        for job_id in todo:
            self.results[job_id] = self.task(job_id)
        return [self.results[job_id] for job_id in todo]

    def start_pending(self) -> None:
        """Run every sent job not yet executed on its own thread, as a worker would pick them up."""
        for job_id in self._not_run():
            self._start(job_id)

    def join(self) -> None:
        for thread in self._threads:
            thread.join(timeout=30)


# Task name -> the in-process worker that runs that kind (the `run_jobs_inline` fixture fills it).
workers: dict[str, InlineWorker] = {}


class InlineDispatcher(RecordingDispatcher):
    """Records every send like its parent, then hands it to the in-process worker of its kind,
    if the test started one; other kinds stay in the outbox only."""

    def send(self, kind: JobKind, job_id: Any, countdown: float) -> None:
        super().send(kind, job_id, countdown)
        worker = workers.get(kind.task)
        if worker is not None:
            worker.send(str(job_id))
