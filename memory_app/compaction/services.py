"""Compaction services: queue, run (on a worker), revert and sweep CompactionRuns.

The job follows the shared lifecycle (memory_app.jobs): claimed with a conditional UPDATE,
retried with backoff, failed with its reason, swept when lost. Here: read, call the LLM
outside any transaction, then write the result in one short transaction that first checks
nothing it covers has changed. Raw messages are never modified: a done run stores the
summary messages that stand in for its seq range when the context is built.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Count, F, Max, Sum
from django.utils import timezone

from memory_app import jobs
from memory_app.compaction import config as memory_config
from memory_app.compaction import processors as ctx
from memory_app.compaction import prompt as summary_prompt
from memory_app.compaction.models import CompactionRun
from memory_app.compaction.selectors import covered_through, latest_done_run
from memory_app.conversations import counting
from memory_app.conversations.models import Message, Session
from memory_app.conversations.selectors import CONTEXT_FIELDS
from memory_app.events.models import MemoryEvent
from memory_app.events.services import event_record
from memory_app.llm import ChatRequest, LLMBudgetExceeded, LLMPermanentError, LLMTransientError, get_backend
from memory_app.usage.llm_calls import llm_complete
from memory_client.vocabulary.messages import to_openai_message
from memsite.errors import Conflict, InvalidInput

log = logging.getLogger(__name__)
Status = CompactionRun.Status


# --- configuration --------------------------------------------------------------------


def session_config(session: Session) -> memory_config.ManagedMemoryConfig:
    return memory_config.parse_config(session.memory_config or {})


def threshold_for(memory_type: str, config: memory_config.ManagedMemoryConfig) -> int | None:
    """The token count that queues a compaction, or None when this session never auto-compacts."""
    policy = config.active_context
    if memory_type != "managed_conversation" or not policy.enabled or policy.mode != "compaction":
        return None
    return config.threshold_tokens


def effective_config(*, team_defaults: dict[str, Any], requested: dict[str, Any] | None) -> dict[str, Any]:
    """Team defaults overlaid with the session's own settings, validated and filled in."""
    try:
        merged = memory_config.merge(team_defaults or {}, requested or {})
        return memory_config.to_dict(memory_config.parse_config(merged))
    except memory_config.ConfigError as exc:
        raise InvalidInput(
            f"memory_config: {exc}", fields={f"memory_config.{path}": msgs for path, msgs in exc.errors.items()}
        ) from exc


# --- queueing -------------------------------------------------------------------------


JOB = jobs.JobKind(
    model=CompactionRun,
    task="memory_app.tasks.compact_session",
    queue_setting="COMPACTION_QUEUE",
    pending=Status.PENDING,
    active=Status.RUNNING,
    done=Status.DONE,
    failed=Status.FAILED,
    max_attempts_setting="COMPACTION_MAX_ATTEMPTS",
    backoff_setting="COMPACTION_RETRY_BACKOFF",
    resend_after_setting="COMPACTION_RESEND_AFTER",
    deadline_setting="COMPACTION_RUNNING_DEADLINE",
    queued_field="queued_at",
    claimed_field="started_at",
    finished_field="finished_at",
    duration_field="duration_ms",
    # Backing off after a failure keeps a session that cannot be compacted (say, one huge
    # assistant round) from queueing a doomed run on every append.
    cooldown_setting="COMPACTION_MIN_INTERVAL",
)


def compaction_request(*, session: Session, trigger: str) -> tuple[CompactionRun, bool]:
    """Queue a compaction unless one is pending or running; returns (run, created).

    The task is sent when the transaction commits, so a worker never looks for a row
    that is not there yet, and a rolled-back write queues nothing.
    """
    active = CompactionRun.objects.filter(session=session, status__in=CompactionRun.ACTIVE).first()
    if active is not None:
        return active, False
    try:
        with transaction.atomic():
            run = CompactionRun.objects.create(team_id=session.team_id, session=session, trigger=trigger)
    except IntegrityError:  # another request queued one between our check and insert
        return CompactionRun.objects.get(session=session, status__in=CompactionRun.ACTIVE), False
    jobs.send(JOB, run.pk, on_commit=True)
    return run, True


def compaction_request_if_due(*, session: Session) -> CompactionRun | None:
    """Queue a threshold compaction unless one is active or one failed within COMPACTION_MIN_INTERVAL."""
    latest = CompactionRun.objects.filter(session=session).order_by("-created_at").first()
    if not jobs.may_queue_after(JOB, latest):
        return None
    run, _ = compaction_request(session=session, trigger=CompactionRun.Trigger.THRESHOLD)
    return run


def sessions_over_threshold() -> list[Session]:
    """Sessions whose active context exceeds their threshold (for the sweeper)."""
    return list(
        Session.objects.filter(compaction_threshold__isnull=False, active_tokens__gt=F("compaction_threshold"))[:500]
    )


# --- reading the pieces ---------------------------------------------------------------


def _original_instruction(session_id: Any) -> dict[str, Any] | None:
    return (
        Message.objects.filter(session_id=session_id, role=Message.Role.USER)
        .order_by("seq")
        .values(*CONTEXT_FIELDS)
        .first()
    )


def _messages_after(session_id: Any, seq: int) -> list[dict[str, Any]]:
    return list(Message.objects.filter(session_id=session_id, seq__gt=seq).order_by("seq").values(*CONTEXT_FIELDS))


def _fingerprint(session_id: Any, after: int, through: int) -> tuple[int, Any]:
    """Count and latest edit time of a seq range: changes if a covered message changes."""
    agg = Message.objects.filter(session_id=session_id, seq__gt=after, seq__lte=through).aggregate(
        n=Count("pk"), edited=Max("updated_at")
    )
    return agg["n"], agg["edited"]


def payload_bytes(messages: list[dict[str, Any]]) -> int:
    """Serialized size of the messages as sent to an LLM (what a 413 is about)."""
    return len(json.dumps([to_openai_message(m) for m in messages], ensure_ascii=False).encode())


def active_tokens(session: Session, run: CompactionRun | None) -> int:
    """System prompt + summary + every message after it, from cached counts."""
    after = run.covered_to_seq if run else 0
    tail = Message.objects.filter(session=session, seq__gt=after).aggregate(t=Sum("token_count"))["t"] or 0
    summary = sum(m["token_count"] for m in (run.summary or [])) if run else 0
    return session.system_prompt_tokens + summary + tail


def _count(message: dict[str, Any]) -> int:
    return counting.message_tokens(message)


# --- the job ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """What a claimed run will summarise, read before the LLM call."""

    previous: CompactionRun | None
    prefix: list[dict[str, Any]]
    through_seq: int
    fingerprint: tuple[int, Any]
    pre_messages: list[dict[str, Any]]


def _plan(run: CompactionRun, config: memory_config.ManagedMemoryConfig) -> Plan | None:
    previous = latest_done_run(run.session_id)
    after = covered_through(previous)
    messages = _messages_after(run.session_id, after)
    grace = config.active_context.summarization.grace_recent_messages
    if run.trigger == CompactionRun.Trigger.PAYLOAD_ERROR:
        grace = max(grace, 1)
    split = ctx.turn_boundary(messages, ctx.protected_tail_start(messages, grace))
    prefix = messages[:split]
    if not prefix:
        return None
    through = prefix[-1]["seq"]
    pre = (previous.summary or []) if previous else []
    return Plan(
        previous=previous,
        prefix=prefix,
        through_seq=through,
        fingerprint=_fingerprint(run.session_id, after, through),
        pre_messages=[*pre, *messages],
    )


def _summarize(run: CompactionRun, plan: Plan, config: memory_config.ManagedMemoryConfig) -> tuple[list[dict], Any]:
    """Call the LLM (outside any transaction) and turn its answer into summary messages."""
    summarization = config.active_context.summarization
    images = summary_prompt.collect_images(plan.prefix)
    previous_text = _summary_text(plan.previous)
    request = ChatRequest(
        messages=summary_prompt.build_prompt(
            previous_summary=previous_text,
            transcript=summary_prompt.transcript_for_prompt(plan.prefix, images),
            output_max_tokens=summarization.output_max_tokens,
        ),
        purpose="summarize",
        max_tokens=summarization.output_max_tokens,
        json_object=True,
        metadata={
            "transcript": plan.prefix,
            "previous_summary": previous_text,
            "image_ids": [ref.image_id for ref in images],
        },
    )
    session = run.session
    result = llm_complete(
        backend=get_backend(), request=request, team=session.team, session=session, agent=session.agent_name
    )
    try:
        data = summary_prompt.parse_summary(result.text)
    except summary_prompt.UnusableSummary as exc:
        raise LLMTransientError(f"unusable summary: {exc}; raw answer: {result.text[:2000]}") from exc
    max_images = summarization.max_retained_images
    budget = None
    if run.trigger == CompactionRun.Trigger.PAYLOAD_ERROR:
        max_images = 5 if max_images is None else max_images
        budget = int(settings.LLM_PAYLOAD_LIMIT_BYTES * 0.5)
    kept = summary_prompt.choose_images(data["keep_images"], images, max_count=max_images, byte_budget=budget)
    summary = summary_prompt.summary_messages(data, kept, model=result.model)
    # Counted once here and stored, so building the context never re-tokenises a summary.
    return [dict(m, token_count=_count(m)) for m in summary], result


def _summary_text(run: CompactionRun | None) -> str | None:
    if run is None or not run.summary:
        return None
    return "\n".join(str(m["content"]) for m in run.summary if isinstance(m.get("content"), str))


def _event(session: Session, kind: str, run: CompactionRun, **data: Any) -> None:
    """A MemoryEvent with the fields the client's CompactionEvent carries (session, agent, run, trigger)."""
    event_record(
        team_id=session.team_id,
        session=session,
        kind=kind,
        data={
            "session_id": str(session.pk),
            "agent_name": session.agent_name,
            "run_id": str(run.pk),
            "trigger": run.trigger,
            **data,
        },
    )


def compaction_execute(*, run_id: str) -> str:
    """The body of the compaction task. Returns a status string for the worker log."""
    if not jobs.claim(JOB, run_id):
        return jobs.ALREADY_CLAIMED
    run = CompactionRun.objects.select_related("session__team").get(pk=run_id)
    session = run.session
    started = time.monotonic()
    config = session_config(session)
    plan = _plan(run, config)
    _event(
        session,
        MemoryEvent.Kind.COMPACTION_STARTED,
        run,
        status="started",
        pre_tokens=session.active_tokens,
        pre_messages=(len(plan.pre_messages) + bool(session.system_prompt)) if plan else 0,
    )
    if plan is None:
        return _finish_failed(run, session, "nothing to compact: every message is in the protected tail", started)
    try:
        summary, result = _summarize(run, plan, config)
    except LLMTransientError as exc:
        return _retry_or_fail(run, session, exc, started)
    except LLMBudgetExceeded as exc:
        return _finish_failed(run, session, exc.detail, started, status=Status.BUDGET_EXCEEDED)
    except LLMPermanentError as exc:
        return _finish_failed(run, session, exc.detail, started)
    return _write_summary(run, session, plan, summary, result, started)


def _write_summary(
    run: CompactionRun, session: Session, plan: Plan, summary: list[dict], result: Any, started: float
) -> str:
    tail = [m for m in plan.pre_messages if m.get("seq", 0) > plan.through_seq]
    pre = (
        [{"role": "system", "content": session.system_prompt, "token_count": session.system_prompt_tokens}]
        if session.system_prompt
        else []
    )
    pre_all = pre + [dict(m, token_count=m.get("token_count") or _count(m)) for m in plan.pre_messages]
    post_all = pre + summary + tail
    is_payload = run.trigger == CompactionRun.Trigger.PAYLOAD_ERROR
    pre_bytes, post_bytes = payload_bytes(pre_all), payload_bytes(post_all)
    if is_payload and post_bytes >= pre_bytes:
        return _finish_failed(run, session, f"payload not reduced ({pre_bytes} -> {post_bytes} bytes)", started)
    pre_tokens = sum(m["token_count"] for m in pre_all)
    post_tokens = sum(m["token_count"] for m in post_all)
    if not is_payload and post_tokens >= pre_tokens:
        # A summary longer than what it replaces would grow the context it exists to shrink.
        return _finish_failed(run, session, f"summary did not reduce tokens ({pre_tokens} -> {post_tokens})", started)
    with transaction.atomic():
        locked = Session.objects.select_for_update().get(pk=session.pk)
        current = CompactionRun.objects.select_for_update().get(pk=run.pk)
        previous = latest_done_run(session.pk)
        after = covered_through(plan.previous)
        if current.status != Status.RUNNING or current.attempts != run.attempts:
            return "superseded"  # the sweeper re-queued it and another attempt owns it now
        if (previous.pk if previous else None) != (plan.previous.pk if plan.previous else None) or _fingerprint(
            session.pk, after, plan.through_seq
        ) != plan.fingerprint:
            current.status = Status.PENDING
            current.queued_at = timezone.now()
            current.save(update_fields=["status", "queued_at"])
            jobs.send(JOB, run.pk, on_commit=True)
            return "covered-messages-changed"
        current.summary = summary
        current.covered_from_seq = after
        current.covered_to_seq = plan.through_seq
        current.status = Status.DONE
        current.backend, current.model = result.backend, result.model
        current.prompt_tokens, current.completion_tokens = result.prompt_tokens, result.completion_tokens
        current.pre_tokens, current.post_tokens = pre_tokens, post_tokens
        current.pre_messages, current.post_messages = len(pre_all), len(post_all)
        current.pre_bytes, current.post_bytes = pre_bytes, post_bytes
        current.stages_run = ["summarization"]
        current.finished_at = timezone.now()
        current.duration_ms = int((time.monotonic() - started) * 1000)
        current.error = ""
        current.save()
        locked.active_tokens = active_tokens(locked, current)
        locked.save(update_fields=["active_tokens"])
        _event(
            locked,
            MemoryEvent.Kind.COMPACTION_COMPLETED,
            current,
            status="completed",
            pre_tokens=current.pre_tokens,
            post_tokens=current.post_tokens,
            pre_messages=current.pre_messages,
            post_messages=current.post_messages,
            duration=current.duration_ms / 1000,
            stages_run=current.stages_run,
        )
    return "done"


def _retry_or_fail(run: CompactionRun, session: Session, exc: LLMTransientError, started: float) -> str:
    return jobs.retry_or_fail(
        JOB,
        run,
        error=exc.detail,
        retry_after=exc.retry_after,
        started=started,
        on_failed=_failed_event(session, started),
    )


def _finish_failed(
    run: CompactionRun, session: Session, reason: str, started: float, *, status: str = Status.FAILED
) -> str:
    return jobs.fail(JOB, run, reason=reason, status=status, started=started, on_failed=_failed_event(session, started))


def _failed_event(session: Session, started: float) -> jobs.OnFailed:
    def record(run: CompactionRun, status: str, reason: str) -> None:
        _event(
            session,
            MemoryEvent.Kind.COMPACTION_FAILED,
            run,
            status="failed",
            reason=status,
            error=reason,
            duration=time.monotonic() - started,
        )

    return record


# --- revert and sweep -----------------------------------------------------------------


@transaction.atomic
def compaction_revert(*, run: CompactionRun) -> CompactionRun:
    """Make the context as if `run` never happened; the ledger keeps it, marked reverted."""
    session = Session.objects.select_for_update().get(pk=run.session_id)
    latest = latest_done_run(session.pk)
    if run.status != Status.DONE or latest is None or latest.pk != run.pk:
        raise Conflict("Only the latest completed compaction can be reverted (revert later ones first).")
    run.status = Status.REVERTED
    run.reverted_at = timezone.now()
    run.save(update_fields=["status", "reverted_at"])
    session.active_tokens = active_tokens(session, latest_done_run(session.pk))
    session.save(update_fields=["active_tokens"])
    _event(session, MemoryEvent.Kind.COMPACTION_REVERTED, run, status="reverted")
    return run


def _lost_event(run: CompactionRun, status: str, reason: str) -> None:
    """A run whose worker died on its last attempt fails visibly: in the ledger and as an event."""
    _event(run.session, MemoryEvent.Kind.COMPACTION_FAILED, run, status="failed", error=reason)


def compaction_sweep() -> dict[str, int]:
    """Re-send runs whose message was lost and re-queue runs whose worker died.

    A pending run not picked up within COMPACTION_RESEND_AFTER is sent again (a second
    copy is harmless: the claim lets only one through). A running run past
    COMPACTION_RUNNING_DEADLINE goes back to pending, or fails once out of attempts.
    """
    counts = jobs.sweep(JOB, on_failed=_lost_event)
    # An append on the one-statement path queues its run after committing; if the process
    # died in between, the session is still over its threshold and gets its run here.
    queued = sum(1 for session in sessions_over_threshold() if compaction_request_if_due(session=session))
    return {**counts, "queued": queued}


def compaction_retry(*, run: CompactionRun) -> tuple[CompactionRun, bool]:
    """Queue a new run for a failed run's session, with the same trigger; returns (run, created).

    The failed run stays in the ledger as it is. Like compaction_request, a run already
    pending or running for the session is returned instead of queueing a second one.
    """
    current = CompactionRun.objects.select_related("session").get(pk=run.pk)
    if current.status != Status.FAILED:
        raise Conflict(f"Only a failed compaction can be retried (this one is {current.status}).")
    return compaction_request(session=current.session, trigger=current.trigger)
