"""Compaction services: queue, run (on a worker), revert and sweep CompactionRuns.

The job follows the shared lifecycle (memory_app.jobs): claimed with a conditional UPDATE,
retried with backoff, failed with its reason, swept when lost. Here: read, call the LLM
outside any transaction, then write the result in one short transaction that first checks
nothing it covers has changed. Raw messages are never modified: a done run stores the
summary messages that stand in for its seq range when the context is built.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Count, F, Max, Sum
from django.utils import timezone

from memory_app import jobs
from memory_app.compaction import config as memory_config
from memory_app.compaction import pipeline
from memory_app.compaction import prompt as summary_prompt
from memory_app.compaction.locks import compaction_run_lock
from memory_app.compaction.models import CompactionRun
from memory_app.compaction.selectors import covered_through, latest_done_run
from memory_app.conversations import context as served_context
from memory_app.conversations import counting
from memory_app.conversations.locks import session_lock
from memory_app.conversations.models import Message, Session
from memory_app.conversations.selectors import CONTEXT_FIELDS
from memory_app.events.models import MemoryEvent
from memory_app.events.services import event_record
from memory_app.llm import ChatRequest, LLMBudgetExceeded, LLMPermanentError, LLMTransientError, get_backend
from memory_app.search import services as search
from memory_app.usage.llm_calls import llm_complete
from memory_client.vocabulary.messages import to_openai_message
from memsite.errors import Conflict, InvalidInput

log = logging.getLogger(__name__)
Status = CompactionRun.Status


# --- configuration --------------------------------------------------------------------


def session_config(session: Session) -> memory_config.ManagedMemoryConfig:
    return memory_config.stored_config(session.memory_config)


def threshold_for(memory_type: str, config: memory_config.ManagedMemoryConfig) -> int | None:
    """The token count over which an append queues a compaction, or None when appends never do:
    not a managed session, summarization off (nothing an LLM would do), or "add" not among its
    `trigger_events`."""
    if memory_type != "managed_conversation" or not pipeline.summarization_usable(config):
        return None
    if "add" not in config.trigger_events:
        return None
    return config.threshold_tokens


def effective_config(*, team_defaults: dict[str, Any], requested: dict[str, Any] | None) -> dict[str, Any]:
    """Team defaults overlaid with the session's own settings, validated and filled in.

    `image_token_estimate` is the server's (MEMSITE_IMAGE_TOKEN_ESTIMATE): every cached
    message count uses it, so a session cannot count images at another rate.
    """
    merged = memory_config.merge(team_defaults or {}, requested or {})
    server_estimate = settings.IMAGE_TOKEN_ESTIMATE
    errors: dict[str, list[str]] = {}
    if "image_token_estimate" in (requested or {}) and requested.get("image_token_estimate") != server_estimate:  # type: ignore[union-attr]
        errors["image_token_estimate"] = [
            f"this server counts every image as {server_estimate} tokens (MEMSITE_IMAGE_TOKEN_ESTIMATE); "
            "a session cannot set another rate"
        ]
    merged["image_token_estimate"] = server_estimate
    try:
        config = memory_config.parse_config(merged)
    except memory_config.ConfigError as exc:
        errors = {**exc.errors, **errors}
    if errors:
        message = "; ".join(f"{path}: {msgs[0]}" for path, msgs in errors.items())
        raise InvalidInput(
            f"memory_config: {message}", fields={f"memory_config.{path}": msgs for path, msgs in errors.items()}
        )
    return memory_config.to_dict(config)


def config_digest(memory_config_json: Any) -> str:
    """A fingerprint of a session's settings: a run that failed under other settings may succeed now."""
    return hashlib.sha256(json.dumps(memory_config_json or {}, sort_keys=True).encode()).hexdigest()


# --- queueing -------------------------------------------------------------------------


JOB = jobs.JobKind(
    kind="compaction",
    label="Context compaction",
    model=CompactionRun,
    task="memory_app.tasks.compact_session",
    queue_setting="COMPACTION_QUEUE",
    metric_label="compaction",
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
    retry_service="memory_app.compaction.services.compaction_job_retry",
    argument_fields=("session", "trigger", "covered_from_seq", "covered_to_seq", "config_digest"),
)

# Runs that ended without a summary: the same session and settings would end the same way.
NO_PROGRESS = (Status.FAILED, Status.SKIPPED, Status.BUDGET_EXCEEDED)


def _queue(session: Session, trigger: str) -> tuple[CompactionRun, bool]:
    active = CompactionRun.objects.filter(session=session, status__in=CompactionRun.ACTIVE).first()
    if active is not None:
        return active, False
    try:
        with transaction.atomic():
            run = CompactionRun.objects.create(
                team_id=session.team_id,
                session=session,
                trigger=trigger,
                seen_seq=session.last_seq,
                config_digest=config_digest(session.memory_config),
            )
    except IntegrityError:  # another request queued one between our check and insert
        return CompactionRun.objects.get(session=session, status__in=CompactionRun.ACTIVE), False
    jobs.send(JOB, run.pk, on_commit=True)
    return run, True


def compaction_request(*, session: Session, trigger: str) -> tuple[CompactionRun, bool]:
    """Queue a compaction asked for by a person or an agent; returns (run, created).

    A run already pending or running is returned instead of a second one. Conflict (409) when
    nothing can be compacted, saying why; a manual request lifts a revert's hold. The task is
    sent when the transaction commits, so a worker never looks for a row that is not there yet.
    """
    active = CompactionRun.objects.filter(session=session, status__in=CompactionRun.ACTIVE).first()
    if active is not None:
        return active, False
    blocker = compaction_blocker(session=session, payload=trigger == CompactionRun.Trigger.PAYLOAD_ERROR)
    if blocker is not None:
        raise Conflict(f"Nothing to compact: {blocker}")
    CompactionRun.objects.filter(session=session, hold_until_tokens__isnull=False).update(hold_until_tokens=None)
    return _queue(session, trigger)


def compaction_blocker(*, session: Session, payload: bool = False) -> str | None:
    """Why a compaction of this session cannot make progress now, or None when it can."""
    if session.memory_type != "managed_conversation":
        return "only managed sessions are compacted"
    config = session_config(session)
    if not pipeline.summarization_usable(config):
        return (
            "summarization is off in this session's memory_config "
            "(active_context enabled/mode, summarization.enabled, processor_order or excluded_processors)"
        )
    after = covered_through(latest_done_run(session.pk))
    grace = config.active_context.summarization.grace_recent_messages
    # The protected tail is the newest few rounds: look at the newest rows first, and at all
    # of them only when the tail reaches past those.
    for limit in (64 + 8 * max(grace, 1), None):
        newest = (
            Message.objects.filter(session=session, seq__gt=after)
            .order_by("-seq")
            .values_list("role", "tool_call_id", "tool_calls")
        )
        rows = list(newest[:limit] if limit else newest)[::-1]
        items = [
            pipeline.Item(
                role=role, tokens=1, seq=index + 1, call_ids=served_context.tool_call_ids(calls), tool_call_id=call_id
            )
            for index, (role, call_id, calls) in enumerate(rows)
        ]
        if pipeline.summarization_prefix_end(items, config, at_least_one=payload) > 0:
            return None
        if limit is None or len(rows) < limit:
            break
    return (
        "every message after the latest summary is in the protected tail "
        f"(summarization.grace_recent_messages = {grace})"
    )


def _recent_runs(session: Session) -> list[CompactionRun]:
    return list(CompactionRun.objects.filter(session=session).order_by("-created_at")[:8])


def auto_compaction_hold(session: Session) -> str | None:
    """Why an automatic compaction is not queued now although the session is over its
    threshold (None: it may be queued, or one is already pending or running)."""
    return _hold(session, _recent_runs(session))


def _hold(session: Session, runs: list[CompactionRun]) -> str | None:
    held = next(
        (
            run
            for run in runs
            if run.status == Status.REVERTED and (run.hold_until_tokens or 0) > session.history_tokens
        ),
        None,
    )
    if held is not None and held.hold_until_tokens is not None:
        more = held.hold_until_tokens - session.history_tokens
        return f"paused after a revert until {more} more tokens of new messages (or Compact now)"
    if not runs or runs[0].status not in NO_PROGRESS:
        return None
    latest = runs[0]
    if latest.seen_seq == session.last_seq and latest.config_digest == config_digest(session.memory_config):
        return f"the latest compaction ended {latest.status} and nothing changed since (new messages or settings)"
    failures = 0
    for run in runs:
        if run.status not in NO_PROGRESS:
            break
        failures += 1
    wait = min(settings.COMPACTION_MIN_INTERVAL * 2 ** (failures - 1), settings.COMPACTION_MAX_BACKOFF)
    ended = latest.finished_at or latest.created_at
    if ended > timezone.now() - timedelta(seconds=wait):
        return f"backing off after {failures} compaction(s) without progress (next try after {wait} s)"
    return None


def compaction_request_if_due(*, session: Session) -> CompactionRun | None:
    """Queue an automatic (threshold) compaction unless one is active, a revert holds it, or
    the latest runs made no progress (not until the session changes, then with a back-off).
    One query when a run is already pending or running (every append over the threshold asks)."""
    runs = _recent_runs(session)
    if runs and runs[0].status in CompactionRun.ACTIVE:
        return runs[0]
    if _hold(session, runs) is not None:
        return None
    run, _ = _queue(session, CompactionRun.Trigger.THRESHOLD)
    return run


def compaction_request_on_read(*, session: Session) -> CompactionRun | None:
    """A read of the context is a trigger when the session lists "get_messages" in its trigger_events."""
    if session.memory_type != "managed_conversation":
        return None
    config = session_config(session)
    if session.active_tokens <= config.threshold_tokens or "get_messages" not in config.trigger_events:
        return None
    if not pipeline.summarization_usable(config):
        return None
    return compaction_request_if_due(session=session)


def sessions_over_threshold() -> list[Session]:
    """Sessions whose active context exceeds their append threshold (for the sweeper)."""
    return list(
        Session.objects.filter(compaction_threshold__isnull=False, active_tokens__gt=F("compaction_threshold"))[:500]
    )


# --- reading the pieces ---------------------------------------------------------------


def _first_user(session_id: Any) -> dict[str, Any] | None:
    return (
        Message.objects.filter(session_id=session_id, role=Message.Role.USER)
        .order_by("seq")
        .values(*CONTEXT_FIELDS)
        .first()
    )


def _messages_after(session_id: Any, seq: int) -> list[dict[str, Any]]:
    # Through the ORM: a hand-written SELECT (the context's) was 5-18 % faster for a typical
    # few thousand messages but 12 % slower for 100k, where its extra copies keep the garbage
    # collector busy (bench/README.md, "The hot path against the machine's limit").
    return list(Message.objects.filter(session_id=session_id, seq__gt=seq).order_by("seq").values(*CONTEXT_FIELDS))


def _fingerprint(session_id: Any, after: int, through: int) -> tuple[int, Any]:
    """Count and latest edit time of a seq range: changes if a covered message changes."""
    agg = Message.objects.filter(session_id=session_id, seq__gt=after, seq__lte=through).aggregate(
        n=Count("pk"), edited=Max("updated_at")
    )
    return agg["n"], agg["edited"]


def payload_bytes(messages: list[dict[str, Any]]) -> int:
    """Serialized size of the messages as sent to an LLM (what a 413 is about)."""
    return list_bytes([message_bytes(m) for m in messages])


def message_bytes(message: dict[str, Any]) -> int:
    """One message's share of `payload_bytes`."""
    return len(json.dumps(to_openai_message(message), ensure_ascii=False).encode())


def list_bytes(sizes: list[int]) -> int:
    """`payload_bytes` of messages of these sizes: JSON's brackets and ", " between items, so a
    message counted once counts in any list it is part of (before and after a compaction)."""
    return 2 + sum(sizes) + 2 * max(len(sizes) - 1, 0)


def active_tokens(session: Session, run: CompactionRun | None) -> int:
    """The active context's size: system prompt + summary (with the instruction it keeps) +
    every message after it, from cached counts. Session.active_tokens caches this figure."""
    after = run.covered_to_seq if run else 0
    tail = Message.objects.filter(session=session, seq__gt=after).aggregate(t=Sum("token_count"))["t"] or 0
    summary = sum(m["token_count"] for m in (run.summary or [])) if run else 0
    return session.system_prompt_tokens + summary + tail


def _count(message: Mapping[str, Any]) -> int:
    return counting.message_tokens(message)


def _image_urls(message: dict[str, Any]) -> list[str]:
    urls = [url for url in message.get("images") or [] if url]
    content = message.get("content")
    if isinstance(content, list):
        urls += [p["image_url"]["url"] for p in content if isinstance(p, dict) and p.get("type") == "image_url"]
    return urls


# --- the job ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """What a claimed run will summarise, read before the LLM call."""

    previous: CompactionRun | None
    prefix: list[dict[str, Any]]  # as the summarizer reads them (tool outputs truncated when that ran)
    through_seq: int
    fingerprint: tuple[int, Any]
    pre_messages: list[dict[str, Any]]  # the previous summary and every message after it
    stages: list[pipeline.Stage]


@dataclass(frozen=True)
class Skip:
    stages: list[pipeline.Stage]
    reason: str


def _plan(run: CompactionRun, session: Session, config: memory_config.ManagedMemoryConfig) -> Plan | Skip:
    """Run the session's processor chain over its active context, as a worker does: which
    processors run, and what summarization (if it runs) reads."""
    previous = latest_done_run(session.pk)
    after = covered_through(previous)
    rows = _messages_after(session.pk, after)
    head = [dict(m) for m in (previous.summary or [])] if previous else []
    items = [pipeline.Item(role=m["role"], tokens=int(m.get("token_count") or 0)) for m in head]
    items += [served_context.row_item(row, config) for row in rows]
    chained = pipeline.run_chain(items, config, fixed_tokens=session.system_prompt_tokens, with_summary=True)
    stages, through = list(chained.window.stages), chained.summarize_through
    forced = run.trigger in (CompactionRun.Trigger.MANUAL, CompactionRun.Trigger.PAYLOAD_ERROR)
    if forced and through == 0 and pipeline.summarization_usable(config):
        # Asked for: the min_reduction_ratio gate is for automatic runs.
        is_payload = run.trigger == CompactionRun.Trigger.PAYLOAD_ERROR
        end = pipeline.summarization_prefix_end(items, config, at_least_one=is_payload)
        if end and any(item.seq is not None for item in items[:end]):
            through = end
            asked = pipeline.Stage(pipeline.SUMMARIZATION, True, f"asked for ({run.trigger})")
            names = [s.processor for s in stages]
            if pipeline.SUMMARIZATION in names:
                stages[names.index(pipeline.SUMMARIZATION)] = asked
            else:
                stages.append(asked)
    if through == 0:
        reasons = [s.reason for s in stages if s.processor == pipeline.SUMMARIZATION]
        return Skip(stages, reasons[0] if reasons else "summarization is not in processor_order")
    prefix_rows = [
        served_context.shorten(row, config) if len(head) + offset in chained.truncated else row
        for offset, row in enumerate(rows[: through - len(head)])
    ]
    through_seq = prefix_rows[-1]["seq"]
    return Plan(
        previous=previous,
        prefix=prefix_rows,
        through_seq=through_seq,
        fingerprint=_fingerprint(session.pk, after, through_seq),
        pre_messages=[*head, *rows],
        stages=stages,
    )


@dataclass(frozen=True)
class Summary:
    messages: list[dict[str, Any]]
    result: Any
    prose: bool  # the model answered in prose, kept as the summary


def _summarize(run: CompactionRun, plan: Plan, config: memory_config.ManagedMemoryConfig) -> Summary:
    """Call the LLM (outside any transaction) and turn its answer into summary messages."""
    summarization = config.active_context.summarization
    session = run.session
    instruction = _first_user(session.pk) if summarization.include_original_instruction else None
    if instruction is not None and instruction["seq"] > plan.through_seq:
        instruction = None
    covered = plan.prefix
    if instruction is not None and _image_urls(instruction) and instruction["seq"] < covered[0]["seq"]:
        # Summarised by an earlier run, the instruction is served again with this summary: its
        # images are offered again, the oldest of all, like those of the messages it covers.
        covered = [instruction, *covered]
    images = summary_prompt.collect_images(covered)
    previous_text = _summary_text(plan.previous)
    budget = summary_budget(config)
    request = ChatRequest(
        messages=summary_prompt.build_prompt(
            previous_summary=previous_text,
            transcript=summary_prompt.transcript_for_prompt(covered, images),
            output_max_tokens=budget,
            images=images if summarization.include_image_payload_bytes else None,
        ),
        purpose="summarize",
        max_tokens=budget,
        json_object=True,
        metadata={
            "transcript": covered,
            "previous_summary": previous_text,
            "image_ids": [ref.image_id for ref in images],
        },
    )
    result = llm_complete(
        backend=get_backend(), request=request, team=session.team, session=session, agent=session.agent_name
    )
    prose = False
    try:
        data = summary_prompt.parse_summary(result.text)
    except summary_prompt.UnusableSummary as exc:
        # The same prompt would get the same answer: never pay for it twice.
        text = (result.text or "").strip()
        if not text:
            raise LLMPermanentError(f"unusable summary: {exc}; the model's answer was empty") from exc
        if text.removeprefix("```json").removeprefix("```").lstrip().startswith("{"):
            # A JSON answer without a usable summary ("{}", cut off at output_max_tokens) is no
            # prose: kept, it would stand in for the whole history it was to summarise.
            raise LLMPermanentError(f"unusable summary: {exc}") from exc
        data, prose = summary_prompt.prose_summary(text), True
    max_images = summarization.max_retained_images
    byte_budget = None
    if run.trigger == CompactionRun.Trigger.PAYLOAD_ERROR:
        max_images = 5 if max_images is None else max_images
        byte_budget = int(settings.LLM_PAYLOAD_LIMIT_BYTES * 0.5)
    # The instruction's images are choices like any other (the cap keeps the newest first), so
    # the kept instruction never holds the context over its threshold or over the cap.
    kept = summary_prompt.choose_images(data["keep_images"], images, max_count=max_images, byte_budget=byte_budget)
    summary = summary_prompt.summary_messages(data, kept, model=result.model)
    head: list[dict[str, Any]] = []
    if instruction is not None:
        # Kept word for word in front of the summary, each image by its id, and counted like every
        # part of the context: when even so it would not leave the summary room within the
        # compaction target, the summary's account of the user's requests stands for it.
        kept_instruction = summary_prompt.with_image_ids(to_openai_message(instruction), images)
        if _count(kept_instruction) <= config.compaction_target_tokens - budget:
            head.append({**kept_instruction, "kind": "instruction", "seq": instruction["seq"]})
    # Counted once here and stored, so building the context never re-tokenises a summary.
    messages = [dict(m, token_count=_count(to_openai_message(m))) for m in [*head, *summary]]
    return Summary(messages=messages, result=result, prose=prose)


def summary_budget(config: memory_config.ManagedMemoryConfig) -> int:
    """`output_max_tokens`, but never more than half of what a compaction aims for: a summary
    that fills the target would leave the next append over the threshold again."""
    half_target = max(config.compaction_target_tokens // 2, 16)
    return min(config.active_context.summarization.output_max_tokens, half_target)


def _summary_text(run: CompactionRun | None) -> str | None:
    if run is None or not run.summary:
        return None
    return "\n".join(
        str(m["content"]) for m in run.summary if isinstance(m.get("content"), str) and m.get("kind") != "instruction"
    )


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
    plan = _plan(run, session, config)
    seen = {"seen_seq": session.last_seq, "config_digest": config_digest(session.memory_config)}
    if run.attempts == 1:  # a retry continues the run the "started" event announced
        _event(
            session,
            MemoryEvent.Kind.COMPACTION_STARTED,
            run,
            status="started",
            pre_tokens=session.active_tokens,
            pre_messages=(len(plan.pre_messages) if isinstance(plan, Plan) else 0) + bool(session.system_prompt),
        )
    if isinstance(plan, Skip):
        fields = {**seen, "stages": [s.to_json() for s in plan.stages], "stages_run": pipeline.stages_run(plan.stages)}
        return _finish_failed(run, session, plan.reason, started, status=Status.SKIPPED, fields=fields)
    fields = {**seen, "stages": [s.to_json() for s in plan.stages]}
    try:
        summary = _summarize(run, plan, config)
    except LLMTransientError as exc:
        return jobs.retry_or_fail(
            JOB,
            run,
            error=exc.detail,
            retry_after=exc.retry_after,
            started=started,
            fields=fields,
            on_failed=_failed_event(session, started),
        )
    except LLMBudgetExceeded as exc:
        return _finish_failed(run, session, exc.detail, started, status=Status.BUDGET_EXCEEDED, fields=fields)
    except LLMPermanentError as exc:
        return _finish_failed(run, session, exc.detail, started, fields=fields)
    return _write_summary(run, session, plan, summary, started, seen)


def _write_summary(
    run: CompactionRun, session: Session, plan: Plan, summary: Summary, started: float, seen: dict[str, Any]
) -> str:
    """Store the summary if it shrinks the context and nothing it covers changed meanwhile.

    The final write takes the session's row lock, then the run's.
    """
    result = summary.result
    stages = [
        pipeline.Stage(s.processor, s.ran, "the model answered in prose: kept as the summary", s.estimated_savings)
        if summary.prose and s.processor == pipeline.SUMMARIZATION
        else s
        for s in plan.stages
    ]
    fields = {**seen, "stages": [s.to_json() for s in stages]}
    # The raw messages after the summarised range (summary messages carry no seq; the kept
    # instruction does, with its kind).
    in_tail = [m.get("kind") is None and m.get("seq", 0) > plan.through_seq for m in plan.pre_messages]
    tail = [m for m, kept in zip(plan.pre_messages, in_tail, strict=True) if kept]
    pre = (
        [{"role": "system", "content": session.system_prompt, "token_count": session.system_prompt_tokens}]
        if session.system_prompt
        else []
    )
    pre_all = pre + [dict(m, token_count=m.get("token_count") or _count(m)) for m in plan.pre_messages]
    post_all = pre + summary.messages + tail
    is_payload = run.trigger == CompactionRun.Trigger.PAYLOAD_ERROR
    # Each message is serialised once: the tail is in both lists.
    head_sizes = [message_bytes(m) for m in pre]
    sizes = [message_bytes(m) for m in plan.pre_messages]
    tail_sizes = [size for size, kept in zip(sizes, in_tail, strict=True) if kept]
    pre_bytes = list_bytes(head_sizes + sizes)
    post_bytes = list_bytes(head_sizes + [message_bytes(m) for m in summary.messages] + tail_sizes)
    if is_payload and post_bytes >= pre_bytes:
        reason = f"payload not reduced ({pre_bytes} -> {post_bytes} bytes)"
        return _finish_failed(run, session, reason, started, fields=fields)
    pre_tokens = sum(m["token_count"] for m in pre_all)
    post_tokens = sum(m["token_count"] for m in post_all)
    if not is_payload and post_tokens >= pre_tokens:
        # A summary longer than what it replaces would grow the context it exists to shrink.
        reason = f"summary did not reduce tokens ({pre_tokens} -> {post_tokens})"
        return _finish_failed(run, session, reason, started, fields=fields)
    with transaction.atomic():
        locked = session_lock(session_id=session.pk)
        current = compaction_run_lock(run_id=run.pk)
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
        current.summary = summary.messages
        current.covered_from_seq = after
        current.covered_to_seq = plan.through_seq
        current.status = Status.DONE
        current.backend, current.model = result.backend, result.model
        current.prompt_tokens, current.completion_tokens = result.prompt_tokens, result.completion_tokens
        current.pre_tokens, current.post_tokens = pre_tokens, post_tokens
        current.pre_messages, current.post_messages = len(pre_all), len(post_all)
        current.pre_bytes, current.post_bytes = pre_bytes, post_bytes
        current.stages = fields["stages"]
        current.stages_run = pipeline.stages_run(stages)
        current.seen_seq, current.config_digest = seen["seen_seq"], seen["config_digest"]
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
        search.index_summary(run=current, agent=locked.agent_name)
    return "done"


def _finish_failed(
    run: CompactionRun,
    session: Session,
    reason: str,
    started: float,
    *,
    status: str = Status.FAILED,
    fields: dict[str, Any] | None = None,
) -> str:
    return jobs.fail(
        JOB,
        run,
        reason=reason,
        status=status,
        started=started,
        fields=fields,
        on_failed=_failed_event(session, started),
    )


def _failed_event(session: Session, started: float) -> jobs.OnFailed:
    def record(run: CompactionRun, status: str, reason: str) -> None:
        _event(
            session,
            MemoryEvent.Kind.COMPACTION_FAILED,
            run,
            status="skipped" if status == Status.SKIPPED else "failed",
            reason=status,
            error=reason,
            duration=time.monotonic() - started,
        )

    return record


# --- revert and sweep -----------------------------------------------------------------


@transaction.atomic
def compaction_revert(*, run: CompactionRun) -> CompactionRun:
    """Make the context as if `run` never happened; the ledger keeps it, marked reverted.

    Takes the session's row lock: the latest completed run it checks stays the latest.
    """
    session = session_lock(session_id=run.session_id)
    latest = latest_done_run(session.pk)
    if run.status != Status.DONE or latest is None or latest.pk != run.pk:
        raise Conflict("Only the latest completed compaction can be reverted (revert later ones first).")
    run.status = Status.REVERTED
    run.reverted_at = timezone.now()
    # Hold automatic compaction: re-summarising the same range at once would undo the revert.
    # It resumes once new messages are worth a compaction (the growth from a compaction's
    # target to the threshold), or when someone asks for one.
    config = session_config(session)
    run.hold_until_tokens = session.history_tokens + config.threshold_tokens - config.compaction_target_tokens
    run.save(update_fields=["status", "reverted_at", "hold_until_tokens"])
    session.active_tokens = active_tokens(session, latest_done_run(session.pk))
    session.save(update_fields=["active_tokens"])
    _event(session, MemoryEvent.Kind.COMPACTION_REVERTED, run, status="reverted")
    search.forget_summaries(session_id=session.pk)
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
    if current.status not in (Status.FAILED, Status.SKIPPED):
        raise Conflict(f"Only a failed or skipped compaction can be retried (this one is {current.status}).")
    return compaction_request(session=current.session, trigger=current.trigger)


def compaction_job_retry(*, job: CompactionRun) -> jobs.Retried:
    """The job registry's retry of a run (the ops page's button): `compaction_retry`."""
    run, created = compaction_retry(run=job)
    return jobs.Retried(job=run, created=created)
