"""Celery tasks: take ids, call ONE service, return a status string.

Job state lives in CompactionRun, FactExtractionRun and WebhookDelivery rows, so a task is safe to run
twice: the claim of the shared job lifecycle (memory_app.jobs) lets only one execution through. Each job
kind (memory_app.jobs.kinds) names its task here by dotted path, which is also the task's registered name.
`observed_job` records each run's duration and outcome (its status string) in the metrics, from the worker
process that ran it, under its kind's metric label.
"""

from __future__ import annotations

from collections.abc import Mapping

from celery import shared_task

from memory_app.agent_records import services as agent_memory
from memory_app.compaction import services as compaction
from memory_app.facts import extraction as fact_extraction
from memory_app.idempotency import services as idempotency
from memory_app.ops.metrics import observed_job
from memory_app.search import services as search_index
from memory_app.usage import services as usage
from memory_app.webhooks import services as webhooks


def _report(counts: Mapping[str, int]) -> str:
    """A sweep's counts as the worker logs them ("resent=1, requeued=0, ..."; the fault tests read it)."""
    return ", ".join(f"{name}={value}" for name, value in counts.items())


@shared_task(acks_late=True, reject_on_worker_lost=True, ignore_result=True)
@observed_job(compaction.JOB.metric_label)
def compact_session(run_id: str) -> str:
    return compaction.compaction_execute(run_id=run_id)


@shared_task(ignore_result=True)
@observed_job("compaction_sweep", status_is_outcome=False)
def sweep_compactions() -> str:
    return _report(compaction.compaction_sweep())


@shared_task(acks_late=True, reject_on_worker_lost=True, ignore_result=True)
@observed_job(fact_extraction.JOB.metric_label)
def extract_facts(run_id: str) -> str:
    return fact_extraction.fact_extraction_execute(run_id=run_id)


@shared_task(ignore_result=True)
@observed_job("fact_extraction_sweep", status_is_outcome=False)
def sweep_fact_extractions() -> str:
    return _report(fact_extraction.fact_extraction_sweep())


@shared_task(ignore_result=True)
@observed_job("agent_memory_archive", status_is_outcome=False)
def archive_agent_memories() -> str:
    return _report(agent_memory.agent_memory_archive_due())


@shared_task(acks_late=True, reject_on_worker_lost=True, ignore_result=True)
@observed_job(search_index.JOB.metric_label)
def index_search(run_id: str) -> str:
    return search_index.search_index_execute(run_id=run_id)


@shared_task(ignore_result=True)
@observed_job("search_index_sweep", status_is_outcome=False)
def sweep_search_index() -> str:
    return _report(search_index.search_index_sweep())


@shared_task(acks_late=True, reject_on_worker_lost=True, ignore_result=True)
@observed_job(webhooks.JOB.metric_label)
def deliver_webhook(delivery_id: str) -> str:
    return webhooks.webhook_deliver(delivery_id=delivery_id)


@shared_task(ignore_result=True)
@observed_job("webhook_delivery_sweep", status_is_outcome=False)
def sweep_webhook_deliveries() -> str:
    return _report(webhooks.webhook_delivery_sweep())


@shared_task(ignore_result=True)
@observed_job("idempotency_purge", status_is_outcome=False)
def purge_idempotency_records() -> str:
    return f"deleted={idempotency.idempotency_purge()}"


@shared_task(ignore_result=True)
@observed_job("context_records_purge", status_is_outcome=False)
def purge_context_records() -> str:
    return f"deleted={usage.context_records_purge()}"
