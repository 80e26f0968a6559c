"""Fact extraction as a durable job: queue, run (on a worker), quarantine, curate, sweep.

The shared lifecycle (memory_app.jobs) claims, retries, fails and sweeps the
FactExtractionRun. Here: read the input, call the LLM outside any transaction, then write
every triple in ONE short transaction that first checks the run is still ours (all or
nothing). An answer that does not parse is quarantined with its raw text and input range,
for staff to retry, correct and accept, or discard; it never writes a partial batch.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, OperationalError, transaction
from django.db.models import Exists, F, OuterRef, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone

from memory_app import jobs
from memory_app.conversations.locks import session_lock
from memory_app.conversations.models import MemoryType, Message, Session
from memory_app.events.models import MemoryEvent
from memory_app.events.services import event_record
from memory_app.facts.locks import extraction_run_lock
from memory_app.facts.models import FactExtractionRun
from memory_app.facts.output import FactOutputError, Triple, normalize_term, parse_fact_output
from memory_app.facts.prompt import fact_request
from memory_app.facts.services import MANUAL_EXTRACTOR, FactInput, WriteOutcome, write_facts
from memory_app.llm import LLMBudgetExceeded, LLMPermanentError, LLMResult, LLMTransientError, get_backend
from memory_app.usage.llm_calls import llm_complete
from memory_client.vocabulary.messages import content_text
from memsite.errors import Conflict, InvalidInput

log = logging.getLogger(__name__)
Run = FactExtractionRun
Status = FactExtractionRun.Status
Trigger = FactExtractionRun.Trigger
CURABLE = (Status.QUARANTINED, Status.FAILED)  # what staff may retry, accept or discard


# --- queueing -------------------------------------------------------------------------


# Quarantined and discarded are this kind's own ends: reached through jobs.fail(status=...)
# and staff curation, never touched by the sweeper.
JOB = jobs.JobKind(
    kind="facts",
    label="Fact extraction",
    model=FactExtractionRun,
    task="memory_app.tasks.extract_facts",
    queue_setting="FACTS_QUEUE",
    metric_label="fact_extraction",
    pending=Status.PENDING,
    active=Status.RUNNING,
    done=Status.DONE,
    failed=Status.FAILED,
    max_attempts_setting="FACTS_MAX_ATTEMPTS",
    backoff_setting="FACTS_RETRY_BACKOFF",
    resend_after_setting="FACTS_RESEND_AFTER",
    deadline_setting="FACTS_RUNNING_DEADLINE",
    queued_field="queued_at",
    claimed_field="started_at",
    finished_field="finished_at",
    duration_field="duration_ms",
    retry_service="memory_app.facts.extraction.fact_extraction_job_retry",
    retries_in_place=True,
    argument_fields=("session", "trigger", "from_seq", "to_seq", "input_role", "input_text"),
    quarantines=True,
)


def _queue(run: FactExtractionRun, countdown: float = 0) -> FactExtractionRun:
    jobs.send(JOB, run.pk, countdown=countdown, on_commit=True)
    return run


@transaction.atomic
def fact_extraction_request(
    *, session: Session, from_seq: int | None = None, to_seq: int | None = None
) -> FactExtractionRun:
    """Queue a run over messages from_seq..to_seq (inclusive; default: the whole session)."""
    last = Session.objects.filter(pk=session.pk).values_list("last_seq", flat=True).get()
    first = from_seq or 1
    if last == 0:
        raise InvalidInput("The session has no messages to extract facts from.")
    if first > last:
        raise InvalidInput.for_field("from_seq", f"after the session's last message (seq {last})")
    through = min(to_seq, last) if to_seq is not None else last
    if through < first:
        raise InvalidInput.for_field("to_seq", "must not be before from_seq")
    run = Run.objects.create(
        team_id=session.team_id, session=session, trigger=Trigger.MANUAL, from_seq=first, to_seq=through
    )
    return _queue(run)


@transaction.atomic
def fact_extraction_request_text(*, session: Session, text: str, role: str) -> FactExtractionRun:
    """Queue a run over a text given with the request (the client's extract_and_update_from_text)."""
    run = Run.objects.create(
        team_id=session.team_id, session=session, trigger=Trigger.TEXT, input_text=text, input_role=role
    )
    return _queue(run)


def fact_extraction_request_if_due(*, session_id: uuid.UUID, team_id: int) -> FactExtractionRun | None:
    """The debounce of automatic extraction: one waiting run per "kg" session.

    The run takes its range (everything after the previous automatic run) only when a
    worker claims it, FACTS_DEBOUNCE_SECONDS later, so the appends made meanwhile ride
    along. Returns the new run, or None when one is already waiting.
    """
    waiting = Run.objects.filter(session_id=session_id, trigger=Trigger.AUTO, status=Status.PENDING, to_seq=None)
    if waiting.exists():
        return None
    delay = settings.FACTS_DEBOUNCE_SECONDS
    try:
        with transaction.atomic():
            run = Run.objects.create(
                team_id=team_id,
                session_id=session_id,
                trigger=Trigger.AUTO,
                queued_at=timezone.now() + timedelta(seconds=delay),
            )
    except IntegrityError:  # a concurrent append queued it between our check and insert
        return None
    return _queue(run, countdown=delay)


# --- reading the input ----------------------------------------------------------------


@dataclass(frozen=True)
class Source:
    message_id: uuid.UUID | None
    role: str
    text_norm: str


@dataclass(frozen=True)
class Plan:
    """What a claimed run sends to the LLM, and where each line came from."""

    lines: list[dict[str, str]]
    sources: list[Source]


def _auto_cursor(session_id: Any, exclude: Any) -> int:
    """The last seq an automatic run of the session has taken (0 before the first)."""
    taken = Run.objects.filter(session_id=session_id, trigger=Trigger.AUTO, to_seq__isnull=False).exclude(pk=exclude)
    return taken.order_by("-to_seq").values_list("to_seq", flat=True).first() or 0


def _chunk(session_id: Any, first: int, last: int) -> tuple[list[dict[str, Any]], int]:
    """Messages first..last within the per-run limits, and the last seq they cover."""
    rows = list(
        Message.objects.filter(session_id=session_id, seq__gte=first, seq__lte=last)
        .order_by("seq")
        .values("id", "seq", "role", "content")[: settings.FACTS_MAX_MESSAGES_PER_RUN]
    )
    budget = settings.FACTS_MAX_INPUT_CHARS
    taken: list[dict[str, Any]] = []
    for row in rows:
        text = content_text(row["content"]).strip()
        if taken and len(text) > budget:
            return taken, taken[-1]["seq"]
        taken.append({**row, "text": text[: max(budget, 0)]})
        budget -= len(text)
    if len(rows) == settings.FACTS_MAX_MESSAGES_PER_RUN:
        return taken, rows[-1]["seq"]
    return taken, last


def _plan_of(rows: Iterable[dict[str, Any]]) -> Plan:
    rows = [row for row in rows if row["text"]]
    return Plan(
        lines=[{"role": row["role"], "content": row["text"]} for row in rows],
        sources=[Source(row["id"], row["role"], normalize_term(row["text"])) for row in rows],
    )


def _text_plan(run: FactExtractionRun) -> Plan:
    text = run.input_text.strip()
    role = run.input_role or "user"
    return Plan(lines=[{"role": role, "content": text}] if text else [], sources=[Source(None, role, "")])


@transaction.atomic
def _plan(run: FactExtractionRun) -> Plan | None:
    """Fix the run's range (an automatic run's on its first attempt), read its input.

    A range over the per-run limits is narrowed to what fits and the rest goes to a
    follow-up run, queued in the same transaction. None when the run is no longer ours.
    Takes the session's row lock (an automatic run's first attempt), then the run's.
    """
    if run.trigger == Trigger.TEXT:
        return _text_plan(run)
    if run.trigger == Trigger.AUTO and run.to_seq is None:
        if run.session_id is None:  # an automatic run is always a session's
            raise ValueError(f"automatic extraction {run.pk} has no session")
        session = session_lock(session_id=run.session_id)  # automatic runs take their ranges one at a time
        first, last = _auto_cursor(run.session_id, exclude=run.pk) + 1, session.last_seq
        if last < first:
            return Plan(lines=[], sources=[])  # nothing new since the previous run
    else:
        first, last = run.from_seq or 1, run.to_seq or 0
    current = extraction_run_lock(run_id=run.pk)
    if current.status != Status.RUNNING or current.attempts != run.attempts:
        return None
    rows, through = _chunk(run.session_id, first, last)
    if (current.from_seq, current.to_seq) != (first, through):
        current.from_seq, current.to_seq = first, through
        current.save(update_fields=["from_seq", "to_seq"])
        run.from_seq, run.to_seq = first, through
        if through < last:
            _follow_up(run, through + 1, last)
    return _plan_of(rows)


def _follow_up(run: FactExtractionRun, first: int, last: int) -> None:
    if run.trigger == Trigger.AUTO:
        follow = Run.objects.create(team_id=run.team_id, session_id=run.session_id, trigger=Trigger.AUTO)
    else:
        follow = Run.objects.create(
            team_id=run.team_id, session_id=run.session_id, trigger=run.trigger, from_seq=first, to_seq=last
        )
    _queue(follow)


def _read_plan(run: FactExtractionRun) -> Plan:
    """The input of a run whose range is already fixed (for accepting an edited answer)."""
    if run.trigger == Trigger.TEXT:
        return _text_plan(run)
    if run.to_seq is None or run.session_id is None:  # only a text run has no session
        return Plan(lines=[], sources=[])
    rows = Message.objects.filter(session_id=run.session_id, seq__gte=run.from_seq or 1, seq__lte=run.to_seq)
    return _plan_of(
        {**row, "text": content_text(row["content"]).strip()}
        for row in rows.order_by("seq").values("id", "seq", "role", "content")
    )


def _source_of(triple: Triple, plan: Plan) -> Source | None:
    """The latest input line that states the fact (mentions its object, best with its subject)."""
    if len(plan.sources) == 1:
        return plan.sources[0]
    subject, obj = normalize_term(triple.subject), normalize_term(triple.object)
    for wanted in ((subject, obj), (obj,), (subject,)):
        for source in reversed(plan.sources):
            if all(term in source.text_norm for term in wanted):
                return source
    return None


def _fact_inputs(triples: list[Triple], plan: Plan) -> list[FactInput]:
    fallback = plan.sources[-1].role if plan.sources else "user"
    items = []
    for triple in triples:
        source = _source_of(triple, plan)
        items.append(
            FactInput(
                role=source.role if source else fallback,
                subject=triple.subject,
                predicate=triple.predicate,
                object=triple.object,
                confidence=triple.confidence,
                replaces=triple.replaces,
                source_message_id=source.message_id if source else None,
            )
        )
    return items


# --- the job ----------------------------------------------------------------------------


def _ms_since(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


def _event(run: FactExtractionRun, kind: str, **data: Any) -> None:
    event_record(
        team_id=run.team_id,
        session_id=run.session_id,
        kind=kind,
        data={
            "run_id": str(run.pk),
            "session_id": str(run.session_id) if run.session_id else None,
            "trigger": run.trigger,
            **data,
        },
    )


def fact_extraction_execute(*, run_id: str) -> str:
    """The body of the extract_facts task. Returns a status string for the worker log."""
    if not jobs.claim(JOB, run_id):
        return jobs.ALREADY_CLAIMED
    run = Run.objects.select_related("team", "session").get(pk=run_id)
    started = time.monotonic()
    plan = _plan(run)
    if plan is None:
        return "superseded"
    if not plan.lines:
        return _apply(run, plan, [], raw_output="", result=None, started=started, expect=(Status.RUNNING,))
    try:
        result = llm_complete(
            backend=get_backend(),
            request=fact_request(lines=plan.lines, max_tokens=settings.FACTS_OUTPUT_MAX_TOKENS),
            team=run.team,
            session=run.session,
            agent=run.session.agent_name if run.session else run.input_role,
        )
    except LLMTransientError as exc:
        return _retry_or_fail(run, exc.detail, exc.retry_after, started)
    except LLMBudgetExceeded as exc:
        return _finish_failed(run, exc.detail, started, status=Status.BUDGET_EXCEEDED)
    except LLMPermanentError as exc:
        return _finish_failed(run, exc.detail, started)
    try:
        triples = parse_fact_output(result.text)
    except FactOutputError as exc:
        return _quarantine(run, result, exc.reason, started)
    try:
        return _apply(run, plan, triples, raw_output=result.text, result=result, started=started)
    except OperationalError as exc:  # a deadlock or a busy database: the whole batch rolled back
        return _retry_or_fail(run, f"database error while writing facts: {exc}", None, started)


def _apply(
    run: FactExtractionRun,
    plan: Plan,
    triples: list[Triple],
    *,
    raw_output: str,
    result: LLMResult | None,
    started: float,
    expect: tuple[str, ...] = (Status.RUNNING,),
    extractor: str | None = None,
) -> str:
    """Write every triple and mark the run done, in one transaction (all or nothing).

    Takes the run's row lock, then write_facts' (subject, predicate) locks.
    """
    with transaction.atomic():
        current = extraction_run_lock(run_id=run.pk)
        if current.status not in expect or (Status.RUNNING in expect and current.attempts != run.attempts):
            return "superseded"  # the sweeper re-queued it, or staff acted on it meanwhile
        if result is not None:
            current.backend, current.model = result.backend, result.model
        outcome = (
            write_facts(
                team_id=current.team_id,
                session_id=current.session_id,
                items=_fact_inputs(triples, plan),
                extractor=extractor or f"{current.backend}:{current.model}",
                extraction_run_id=current.pk,
            )
            if triples
            else WriteOutcome()
        )
        current.status = Status.DONE
        current.raw_output = raw_output
        current.error = ""
        current.facts_added, current.facts_seen = len(outcome.added), len(outcome.seen)
        current.facts_invalidated = len(outcome.invalidated)
        current.finished_at = timezone.now()
        current.duration_ms = _ms_since(started)
        current.save()
        if plan.lines:
            _event(
                current,
                MemoryEvent.Kind.FACTS_EXTRACTED,
                facts_added=current.facts_added,
                facts_seen=current.facts_seen,
                facts_invalidated=current.facts_invalidated,
                from_seq=current.from_seq,
                to_seq=current.to_seq,
            )
    return "done"


def _retry_or_fail(run: FactExtractionRun, detail: str, retry_after: float | None, started: float) -> str:
    return jobs.retry_or_fail(JOB, run, error=detail, retry_after=retry_after, started=started, on_failed=_failed_event)


def _finish_failed(run: FactExtractionRun, reason: str, started: float, *, status: str = Status.FAILED) -> str:
    return jobs.fail(JOB, run, reason=reason, status=status, started=started, on_failed=_failed_event)


def _failed_event(run: FactExtractionRun, status: str, reason: str) -> None:
    _event(run, MemoryEvent.Kind.FACT_EXTRACTION_FAILED, reason=status, error=reason)


def _quarantined_event(run: FactExtractionRun, status: str, reason: str) -> None:
    _event(run, MemoryEvent.Kind.FACT_EXTRACTION_QUARANTINED, error=reason)


def _quarantine(run: FactExtractionRun, result: LLMResult, reason: str, started: float) -> str:
    """Keep the unusable answer, the reason and the input range for staff; write no fact."""
    return jobs.fail(
        JOB,
        run,
        reason=reason,
        status=Status.QUARANTINED,
        started=started,
        fields={"raw_output": result.text, "backend": result.backend, "model": result.model},
        on_failed=_quarantined_event,
    )


# --- curation (staff) -------------------------------------------------------------------


def _refuse(run: FactExtractionRun, action: str) -> Conflict:
    return Conflict(f"Only a quarantined or failed extraction can be {action} (this one is {run.status}).")


@transaction.atomic
def fact_extraction_retry(*, run: FactExtractionRun) -> FactExtractionRun:
    """Run a quarantined or failed extraction again, over the same input."""
    if not Run.objects.filter(pk=run.pk, status__in=CURABLE).update(
        status=Status.PENDING,
        attempts=0,
        queued_at=timezone.now(),
        pending_since=timezone.now(),
        finished_at=None,
        duration_ms=None,
    ):
        raise _refuse(Run.objects.get(pk=run.pk), "retried")
    return _queue(Run.objects.get(pk=run.pk))


def fact_extraction_job_retry(*, job: FactExtractionRun) -> jobs.Retried:
    """The job registry's retry (the ops page's button): the run itself is queued again, over the
    same input, by `fact_extraction_retry`."""
    return jobs.Retried(job=fact_extraction_retry(run=job), created=True)


def fact_extraction_accept(*, run: FactExtractionRun, output: str) -> FactExtractionRun:
    """Apply a staff-corrected answer as if the LLM had given it; the run becomes done.

    The accepted text replaces the run's raw output; its facts are marked "manual".
    """
    if run.status not in CURABLE:
        raise _refuse(run, "accepted")
    try:
        triples = parse_fact_output(output)
    except FactOutputError as exc:
        raise InvalidInput.for_field("output", exc.reason) from exc
    outcome = _apply(
        run,
        _read_plan(run),
        triples,
        raw_output=output,
        result=None,
        started=time.monotonic(),
        expect=CURABLE,
        extractor=MANUAL_EXTRACTOR,
    )
    if outcome != "done":
        raise _refuse(Run.objects.get(pk=run.pk), "accepted")
    return Run.objects.get(pk=run.pk)


@transaction.atomic
def fact_extraction_discard(*, run: FactExtractionRun) -> FactExtractionRun:
    """Give up on a quarantined or failed extraction; it stays listed, marked discarded."""
    if not Run.objects.filter(pk=run.pk, status__in=CURABLE).update(status=Status.DISCARDED):
        raise _refuse(Run.objects.get(pk=run.pk), "discarded")
    return Run.objects.get(pk=run.pk)


# --- sweep ------------------------------------------------------------------------------


def _lost_event(run: FactExtractionRun, status: str, reason: str) -> None:
    _event(run, MemoryEvent.Kind.FACT_EXTRACTION_FAILED, error=reason)


def sessions_with_unextracted_messages(limit: int = 500) -> list[tuple[uuid.UUID, int]]:
    """(session id, team id) of "kg" sessions with messages no automatic run has taken
    and no automatic run under way: their append's run was lost before it was recorded."""
    cursor = Subquery(
        Run.objects.filter(session=OuterRef("pk"), trigger=Trigger.AUTO, to_seq__isnull=False)
        .order_by("-to_seq")
        .values("to_seq")[:1]
    )
    active = Run.objects.filter(session=OuterRef("pk"), trigger=Trigger.AUTO, status__in=Run.ACTIVE)
    return list(
        Session.objects.filter(memory_type=MemoryType.KG)
        .annotate(cursor=Coalesce(cursor, 0))
        .filter(last_seq__gt=F("cursor"))
        .exclude(Exists(active))
        .values_list("pk", "team_id")[:limit]
    )


def fact_extraction_sweep() -> dict[str, int]:
    """Re-send runs whose message was lost, re-queue runs whose worker died, and queue
    the automatic run of any "kg" session left with unextracted messages.

    A second copy of a task is harmless: the claim lets only one through.
    """
    counts = jobs.sweep(JOB, on_failed=_lost_event)
    queued = sum(
        1
        for session_id, team_id in sessions_with_unextracted_messages()
        if fact_extraction_request_if_due(session_id=session_id, team_id=team_id)
    )
    return {**counts, "queued": queued}
