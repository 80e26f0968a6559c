"""Durable jobs (compaction runs, fact extractions, search index runs, webhook deliveries): one
lifecycle, in `lifecycle`."""

from memory_app.jobs.lifecycle import (
    ALREADY_CLAIMED,
    Dispatcher,
    JobKind,
    OnFailed,
    claim,
    complete,
    dispatch,
    fail,
    forget_claim,
    may_queue_after,
    owned,
    record_crash,
    retry_delay,
    retry_or_fail,
    schedule_retry,
    send,
    sweep,
    worker_name,
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
    "forget_claim",
    "may_queue_after",
    "owned",
    "record_crash",
    "retry_delay",
    "retry_or_fail",
    "schedule_retry",
    "send",
    "sweep",
    "worker_name",
]
