"""Durable jobs (compaction runs, fact extractions, webhook deliveries): one lifecycle, in `lifecycle`."""

from memory_app.jobs.lifecycle import (
    ALREADY_CLAIMED,
    Dispatcher,
    JobKind,
    OnFailed,
    claim,
    complete,
    dispatch,
    fail,
    may_queue_after,
    owned,
    retry_delay,
    retry_or_fail,
    schedule_retry,
    send,
    sweep,
)

__all__ = [
    "ALREADY_CLAIMED",
    "Dispatcher",
    "JobKind",
    "OnFailed",
    "claim",
    "complete",
    "dispatch",
    "fail",
    "may_queue_after",
    "owned",
    "retry_delay",
    "retry_or_fail",
    "schedule_retry",
    "send",
    "sweep",
]
