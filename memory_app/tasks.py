"""Celery tasks: take ids, call ONE service, return a status string.

Job state lives in CompactionRun and FactExtractionRun rows, so a task is safe to run twice: the service's
claim lets only one execution through.
"""

from __future__ import annotations

from celery import shared_task

from memory_app import agent_memory, compaction, fact_extraction, idempotency


@shared_task(acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def compact_session(run_id: str) -> str:
    return compaction.compaction_execute(run_id=run_id)


@shared_task(ignore_result=True)
def sweep_compactions() -> str:
    counts = compaction.compaction_sweep()
    return ", ".join(f"{name}={value}" for name, value in counts.items())


@shared_task(acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def extract_facts(run_id: str) -> str:
    return fact_extraction.fact_extraction_execute(run_id=run_id)


@shared_task(ignore_result=True)
def sweep_fact_extractions() -> str:
    counts = fact_extraction.fact_extraction_sweep()
    return ", ".join(f"{name}={value}" for name, value in counts.items())


@shared_task(ignore_result=True)
def archive_agent_memories() -> str:
    counts = agent_memory.agent_memory_archive_due()
    return ", ".join(f"{name}={value}" for name, value in counts.items())


@shared_task(ignore_result=True)
def purge_idempotency_records() -> str:
    return f"deleted={idempotency.idempotency_purge()}"
