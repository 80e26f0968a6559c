"""The job lifecycle's receivers of Celery's task signals, connected by MemoryAppConfig.ready().

Every process that loads the app (web, worker, shell) connects them; only a worker, or a task run
eagerly, ever sends these signals.
"""

from __future__ import annotations

from celery.signals import task_failure, task_prerun, worker_ready, worker_shutdown

from memory_app import jobs
from memory_app.jobs import heartbeat


def no_job_claimed_yet(**_: object) -> None:
    """A task starts holding no job, so a crash is never written to the job of the task before."""
    jobs.forget_claim()


def record_crash_on_the_job(exception: BaseException | None = None, **_: object) -> None:
    """A job task that raised (a bug, a lost database): its traceback goes on the row it claimed,
    for the ops page's job detail, instead of only into this worker's log."""
    if exception is not None:
        jobs.record_crash(exception)


def connect_job_lifecycle() -> None:
    # Strong references: the receivers are module functions, and dispatch_uid keeps a second
    # ready() from connecting them twice.
    task_prerun.connect(no_job_claimed_yet, weak=False, dispatch_uid="memory_app.no_job_claimed_yet")
    task_failure.connect(record_crash_on_the_job, weak=False, dispatch_uid="memory_app.record_crash_on_the_job")
    # Each worker's main process beats for it (the ops page's account of workers).
    worker_ready.connect(heartbeat.start_beating, weak=False, dispatch_uid="memory_app.worker_heartbeat_start")
    worker_shutdown.connect(heartbeat.stop_beating, weak=False, dispatch_uid="memory_app.worker_heartbeat_stop")
