"""Reads of the token-economics ledgers: spend on LLM work beside savings of served contexts.

"Spent" is prompt + completion tokens of memsite's own LLM calls (summaries, fact extraction,
experience selection). "Saved" is, per context served, the tokens of the raw history it
stands for minus the tokens it holds: what compaction and windowing kept out of the agent's
own LLM requests, told apart as `window_kept_out_tokens` and `compaction_saved_tokens`.
Every aggregate is one GROUP BY query per ledger.
"""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass, field, fields
from datetime import UTC, date, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Count, F, Manager, Q, QuerySet, Sum, Value
from django.db.models.functions import Coalesce, Greatest, TruncDate
from django.utils import timezone

from memory_app.conversations.models import Session
from memory_app.tenancy.models import Team
from memory_app.usage import context_ledger
from memory_app.usage.models import ContextRecord, ContextServe, LLMCall, context_id_time
from memory_client.vocabulary.messages import LLMMessage
from memory_client.vocabulary.wire import ContextBreakdownBody, ContextRecordBody, ContextReplay, ServedPartInfo
from memsite.errors import NotFound, NotRecordedYet

GROUPS = ("session", "agent", "purpose")
# The periods the usage page offers, by the value its query string carries.
DAY_RANGES = {"7": 7, "30": 30, "90": 90}
CONTEXT_PURPOSE = "context"  # the purpose row that holds served contexts when grouping by purpose


@dataclass
class UsageFigures:
    llm_calls: int = 0
    llm_errors: int = 0
    budget_refusals: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    contexts_served: int = 0
    raw_tokens: int = 0
    served_tokens: int = 0
    saved_tokens: int = 0
    # The saving told apart (contexts served since the ledger kept both): stored messages the
    # window kept out, and what compaction's summaries, truncation and packing kept out.
    # saved = window + compaction - what the context adds (recalled memories, reply priming).
    window_kept_out_tokens: int = 0
    compaction_saved_tokens: int = 0

    @property
    def spent_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def net_tokens(self) -> int:
        """Saved minus spent: positive when memory work paid for itself."""
        return self.saved_tokens - self.spent_tokens

    def add(self, values: dict[str, Any]) -> None:
        for name in (f.name for f in fields(self)):
            setattr(self, name, getattr(self, name) + int(values.get(name) or 0))

    def as_dict(self) -> dict[str, int]:
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        return {**data, "spent_tokens": self.spent_tokens, "net_tokens": self.net_tokens}


@dataclass
class UsageGroup:
    key: str | None
    label: str
    figures: UsageFigures = field(default_factory=UsageFigures)


@dataclass(frozen=True)
class UsageFilter:
    team: Team
    since: datetime
    until: datetime
    session: Session | None = None
    agent: str | None = None


def default_range(now: datetime | None = None, days: int = 30) -> tuple[datetime, datetime]:
    now = now or timezone.now()
    return now - timedelta(days=days), now


def _scoped(queryset: Manager | QuerySet, scope: UsageFilter) -> QuerySet:
    queryset = queryset.filter(team=scope.team, created_at__gte=scope.since, created_at__lt=scope.until)
    if scope.session is not None:
        queryset = queryset.filter(session=scope.session)
    if scope.agent is not None:
        queryset = queryset.filter(agent=scope.agent)
    return queryset


# Aggregate aliases carry a prefix: an alias named like a column ("raw_tokens") would shadow
# that column for the F() expressions of the aggregates after it.
_PREFIX = "agg_"
_LLM_AGGREGATES = {
    _PREFIX + "llm_calls": Count("id"),
    _PREFIX + "llm_errors": Count("id", filter=~Q(outcome=LLMCall.Outcome.OK)),
    _PREFIX + "budget_refusals": Count("id", filter=Q(outcome=LLMCall.Outcome.BUDGET_EXCEEDED)),
    _PREFIX + "prompt_tokens": Coalesce(Sum("prompt_tokens"), 0),
    _PREFIX + "completion_tokens": Coalesce(Sum("completion_tokens"), 0),
}
# Per row, so a tiny context that costs more than its history (reply priming) saves 0, not less.
_SAVED = Coalesce(Sum(Greatest(F("raw_tokens") - F("served_tokens"), Value(0))), 0)
_SPLIT = Q(window_kept_out_tokens__isnull=False, window_tokens__isnull=False)
# The raw history less the context's own messages (system prompt, summary, window) and what the
# window kept out: what compaction kept out.
_COMPACTION_SAVED = Coalesce(
    Sum(
        Greatest(
            F("raw_tokens")
            - F("system_tokens")
            - F("summary_tokens")
            - F("window_tokens")
            - F("window_kept_out_tokens"),
            Value(0),
        ),
        filter=_SPLIT,
    ),
    0,
)
_CONTEXT_AGGREGATES = {
    _PREFIX + "contexts_served": Count("id"),
    _PREFIX + "raw_tokens": Coalesce(Sum("raw_tokens"), 0),
    _PREFIX + "served_tokens": Coalesce(Sum("served_tokens"), 0),
    _PREFIX + "saved_tokens": _SAVED,
    _PREFIX + "window_kept_out_tokens": Coalesce(Sum("window_kept_out_tokens", filter=_SPLIT), 0),
    _PREFIX + "compaction_saved_tokens": _COMPACTION_SAVED,
}


def _figures(row: dict[str, Any]) -> dict[str, Any]:
    return {name.removeprefix(_PREFIX): value for name, value in row.items() if name.startswith(_PREFIX)}


def usage_totals(*, scope: UsageFilter) -> UsageFigures:
    figures = UsageFigures()
    figures.add(_figures(_scoped(LLMCall.objects, scope).aggregate(**_LLM_AGGREGATES)))
    figures.add(_figures(_scoped(ContextServe.objects, scope).aggregate(**_CONTEXT_AGGREGATES)))
    return figures


def _group_rows(queryset: QuerySet, key: str, aggregates: dict[str, Any]) -> list[dict[str, Any]]:
    return list(queryset.values(key).annotate(**aggregates).order_by())


def usage_groups(*, scope: UsageFilter, group_by: str) -> list[UsageGroup]:
    """Figures per session, agent or purpose, largest spend first (then largest saving)."""
    if group_by not in GROUPS:
        raise ValueError(f"group_by must be one of {GROUPS}")
    key = "session_id" if group_by == "session" else group_by
    groups: dict[Any, UsageGroup] = {}

    def group(value: Any) -> UsageGroup:
        if value not in groups:
            groups[value] = UsageGroup(key=None if value is None else str(value), label="")
        return groups[value]

    for row in _group_rows(_scoped(LLMCall.objects, scope), key, _LLM_AGGREGATES):
        group(row[key]).figures.add(_figures(row))
    context_key = key if group_by != "purpose" else None
    for row in _group_rows(_scoped(ContextServe.objects, scope), context_key or "team_id", _CONTEXT_AGGREGATES):
        group(row[context_key] if context_key else CONTEXT_PURPOSE).figures.add(_figures(row))
    _label(groups, group_by)
    return sorted(groups.values(), key=lambda g: (-g.figures.spent_tokens, -g.figures.saved_tokens, g.label))


def _label(groups: dict[Any, UsageGroup], group_by: str) -> None:
    if group_by != "session":
        for value, item in groups.items():
            item.label = str(value) if value not in (None, "") else "(none)"
        return
    names = dict(
        Session.objects.filter(pk__in=[value for value in groups if value is not None]).values_list("pk", "external_id")
    )
    for value, item in groups.items():
        item.label = "(team-wide)" if value is None else (names.get(value) or str(value))


@dataclass(frozen=True)
class DailyUsage:
    day: date
    spent_tokens: int
    saved_tokens: int


def usage_daily(*, scope: UsageFilter) -> list[DailyUsage]:
    """Spent and saved tokens per UTC day of the range, days without activity included."""
    spent = {
        row["day"]: row["spent"]
        for row in _scoped(LLMCall.objects, scope)
        .annotate(day=TruncDate("created_at"))
        .values("day")
        .annotate(spent=Coalesce(Sum(F("prompt_tokens") + F("completion_tokens")), 0))
        .order_by()
    }
    saved = {
        row["day"]: row["saved"]
        for row in _scoped(ContextServe.objects, scope)
        .annotate(day=TruncDate("created_at"))
        .values("day")
        .annotate(saved=_SAVED)
        .order_by()
    }
    first = scope.since.astimezone(UTC).date()
    last = (scope.until - timedelta(microseconds=1)).astimezone(UTC).date()  # `until` is exclusive
    days = [first + timedelta(days=offset) for offset in range((last - first).days + 1)]
    return [
        DailyUsage(day=day, spent_tokens=int(spent.get(day, 0)), saved_tokens=int(saved.get(day, 0))) for day in days
    ]


# --- the daily LLM token budget (llm_calls.llm_complete checks it before each call) --------------


def day_start(now: datetime | None = None) -> datetime:
    """The start of the current budget day (UTC midnight)."""
    now = now or timezone.now()
    return now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def daily_budget(team: Team) -> int:
    """The team's daily token budget; 0 means unlimited."""
    if team.daily_llm_token_budget is not None:
        return team.daily_llm_token_budget
    return settings.DAILY_LLM_TOKEN_BUDGET


def tokens_spent_today(*, team_id: int) -> int:
    return LLMCall.objects.filter(team_id=team_id, created_at__gte=day_start()).aggregate(
        total=Coalesce(Sum(F("prompt_tokens") + F("completion_tokens")), 0)
    )["total"]


def seconds_until_budget_resets() -> int:
    return max(int((day_start() + timedelta(days=1) - timezone.now()).total_seconds()), 1)


@dataclass(frozen=True)
class BudgetStatus:
    daily_budget: int  # 0 = unlimited
    spent_today: int
    resets_in_seconds: int

    @property
    def remaining(self) -> int | None:
        return None if not self.daily_budget else max(self.daily_budget - self.spent_today, 0)


def budget_status(*, team: Team) -> BudgetStatus:
    return BudgetStatus(
        daily_budget=daily_budget(team),
        spent_today=tokens_spent_today(team_id=team.pk),
        resets_in_seconds=seconds_until_budget_resets(),
    )


# --- served contexts, one by one ---------------------------------------------------------------


@dataclass(frozen=True)
class ServedPart:
    key: str  # system | summary | recall | window | priming
    label: str
    tokens: int
    percent: float  # of the served tokens, for the stacked bar
    counts: str  # what the tokens are, for the title one hover away


PART_LABELS: tuple[tuple[str, str, str], ...] = (
    ("system", "System prompt", "the session's system prompt"),
    ("summary", "Summary", "the latest compaction summary, with the original instruction it keeps"),
    ("recall", "Recalled memories", "the one message of memories recall injected for the query"),
    ("window", "Window", "the raw messages served after the summary (a borrowed latest user message too)"),
    ("priming", "Reply priming", "the tokens every chat request pays to prime the reply"),
)


@dataclass(frozen=True)
class ServedBreakdown:
    serve: ContextServe
    parts: list[ServedPart]  # empty when the row predates the breakdown

    @property
    def parts_total(self) -> int:
        return sum(part.tokens for part in self.parts)


def served_breakdown(serve: ContextServe) -> ServedBreakdown:
    """A ledger row's served tokens by part, as stored when it was served (nothing recounted)."""
    if not serve.has_parts:
        return ServedBreakdown(serve=serve, parts=[])
    total = max(serve.served_tokens, 1)
    parts = []
    for key, label, counts in PART_LABELS:
        tokens = int(getattr(serve, f"{key}_tokens") or 0)
        parts.append(ServedPart(key, label, tokens, 100 * tokens / total, counts))
    return ServedBreakdown(serve=serve, parts=parts)


def served_contexts(*, session: Session, limit: int) -> list[ServedBreakdown]:
    """The session's latest served contexts, newest first, each with its parts. One query."""
    rows = ContextServe.objects.filter(session=session, team_id=session.team_id).order_by("-created_at", "-pk")
    return [served_breakdown(serve) for serve in rows[:limit]]


def served_context_by_context_id(*, team: Team, context_id: uuid.UUID) -> ContextServe:
    """The team's ledger row of the served context an answer named (NotFound otherwise)."""
    serve = ContextServe.objects.filter(team=team, context_id=context_id).first()
    if serve is None and context_ledger.holds(context_id):
        context_ledger.flush()
        serve = ContextServe.objects.filter(team=team, context_id=context_id).first()
    if serve is None:
        raise NotFound("Served context not found.")
    return serve


def served_context_get(*, team: Team, serve_id: int) -> ContextServe:
    """One served context of the team (another team's is NotFound, as a missing one)."""
    try:
        return ContextServe.objects.select_related("session").get(team=team, pk=serve_id)
    except ContextServe.DoesNotExist as exc:
        raise NotFound("Served context not found.") from exc


# --- served contexts replayed: what exactly the model saw --------------------------------------

# How long after its id was made a served context may still sit in its process's batch: the
# flush interval, plus a margin for a slow batch.
UNWRITTEN_GRACE_SECONDS = 5.0
SUMMARY_KINDS = ("summary", "instruction")


def _record(team: Team, context_id: uuid.UUID) -> ContextRecord | None:
    return ContextRecord.objects.select_related("serve").filter(team=team, serve__context_id=context_id).first()


def context_record_get(*, team: Team, context_id: uuid.UUID) -> ContextRecord:
    """The team's replay record of one served context.

    Another team's id, an unknown one and one past MEMSITE_CONTEXT_RECORD_DAYS are NotFound
    alike. An id made so recently that its batch may not be written yet is NotRecordedYet
    (also a 404, with Retry-After), whoever's it is: the answer says nothing of other teams.
    """
    record = _record(team, context_id)
    if record is None and context_ledger.holds(context_id):
        context_ledger.flush()  # served by this process: its batch is written now
        record = _record(team, context_id)
    if record is not None:
        return record
    interval = settings.CONTEXT_LEDGER_FLUSH_SECONDS
    made = context_id_time(context_id)
    if (
        interval > 0
        and made is not None
        and timezone.now() - made < timedelta(seconds=interval + UNWRITTEN_GRACE_SECONDS)
    ):
        raise NotRecordedYet(
            "Served context not recorded yet: its batch is written within seconds; ask again.",
            retry_after=max(math.ceil(interval), 1),
        )
    raise NotFound(f"Served context not found (context records are kept {settings.CONTEXT_RECORD_DAYS} days).")


def context_record_of(serve: ContextServe) -> ContextRecord | None:
    """The replay record of a ledger row, if it was kept and not yet purged."""
    if serve.context_id is None:
        return None
    return ContextRecord.objects.filter(serve__context_id=serve.context_id, team_id=serve.team_id).first()


@dataclass(frozen=True)
class Neighbours:
    """The ids of the session's served contexts just before and after one (that still have records)."""

    previous: uuid.UUID | None
    next: uuid.UUID | None


def context_record_neighbours(record: ContextRecord) -> Neighbours:
    """Two index reads of ids only: a neighbour's payload is not read (nor decompressed)."""
    same_session = ContextRecord.objects.filter(session_id=record.session_id, team_id=record.team_id)
    later = Q(created_at__gt=record.created_at) | Q(created_at=record.created_at, serve_id__gt=record.serve_id)
    earlier = Q(created_at__lt=record.created_at) | Q(created_at=record.created_at, serve_id__lt=record.serve_id)
    ids = same_session.values_list("serve__context_id", flat=True)
    return Neighbours(
        previous=ids.filter(earlier).order_by("-created_at", "-serve_id").first(),
        next=ids.filter(later).order_by("created_at", "serve_id").first(),
    )


def context_record_body(*, team: Team, context_id: uuid.UUID) -> ContextRecordBody | None:
    """Only the payload of a served context's record (None when it has none)."""
    return ContextRecord.objects.filter(team=team, serve__context_id=context_id).values_list("body", flat=True).first()


def _breakdown(serve: ContextServe) -> ContextBreakdownBody | None:
    if not serve.has_parts:
        return None
    return {
        "system": serve.system_tokens or 0,
        "summary": serve.summary_tokens or 0,
        "recall": serve.recall_tokens or 0,
        "window": serve.window_tokens or 0,
        "priming": serve.priming_tokens or 0,
    }


def context_replay(record: ContextRecord, neighbours: Neighbours) -> ContextReplay:
    """The replay as the API sends it: the stored payload beside its ledger row's figures."""
    body: ContextRecordBody = record.body
    serve = record.serve
    summary = body.get("summary")
    return {
        "context_id": str(record.pk),
        "session_id": str(record.session_id),
        "served_at": serve.created_at.isoformat(),
        "agent": serve.agent,
        "params": body["params"],
        "messages": body["messages"],
        "parts": body["parts"],
        "token_count": serve.served_tokens,
        "raw_tokens": serve.raw_tokens,
        "breakdown": _breakdown(serve),
        "summary": None
        if not summary
        else {
            "run_id": summary["run_id"],
            "covered_to_seq": summary["covered_to_seq"],
            "messages": [
                message
                for message, part in zip(body["messages"], body["parts"], strict=True)
                if part["kind"] in SUMMARY_KINDS
            ],
        },
        "recall": body["recall"],
        "previous_context_id": str(neighbours.previous) if neighbours.previous else None,
        "next_context_id": str(neighbours.next) if neighbours.next else None,
    }


@dataclass(frozen=True)
class DiffLine:
    """One message of two served contexts: in the later one only, the earlier one only, or both."""

    status: str  # added | dropped | changed | same
    kind: str
    seq: int | None
    role: str
    before: LLMMessage | None
    after: LLMMessage | None


@dataclass(frozen=True)
class ContextDiff:
    lines: list[DiffLine]

    def of(self, status: str) -> list[DiffLine]:
        return [line for line in self.lines if line.status == status]

    @property
    def added(self) -> list[DiffLine]:
        return self.of("added")

    @property
    def dropped(self) -> list[DiffLine]:
        return self.of("dropped")

    @property
    def changed(self) -> list[DiffLine]:
        return self.of("changed")

    @property
    def same(self) -> int:
        return len(self.of("same"))


def _keyed(body: ContextRecordBody) -> dict[tuple[str, int], tuple[ServedPartInfo, LLMMessage]]:
    """Messages by identity: a stored message by its seq; the system prompt, the recalled
    memories and the summary by their kind and place among their kind."""
    keyed: dict[tuple[str, int], tuple[ServedPartInfo, LLMMessage]] = {}
    seen: dict[str, int] = {}
    for part, message in zip(body["parts"], body["messages"], strict=True):
        if part["seq"] is not None and part["kind"] in ("message", "borrowed"):
            key = ("message", part["seq"])
        else:
            seen[part["kind"]] = seen.get(part["kind"], -1) + 1
            key = (part["kind"], seen[part["kind"]])
        keyed[key] = (part, message)
    return keyed


def context_diff(before: ContextRecordBody, after: ContextRecordBody) -> ContextDiff:
    """What changed from one served context to the next: in the later context's order, each
    dropped message after the ones it had."""
    old, new = _keyed(before), _keyed(after)
    lines: list[DiffLine] = []
    for key, (part, message) in new.items():
        if key not in old:
            lines.append(DiffLine("added", part["kind"], part["seq"], str(message.get("role", "")), None, message))
            continue
        status = "same" if old[key][1] == message else "changed"
        lines.append(DiffLine(status, part["kind"], part["seq"], str(message.get("role", "")), old[key][1], message))
    for key, (part, message) in old.items():
        if key not in new:
            lines.append(DiffLine("dropped", part["kind"], part["seq"], str(message.get("role", "")), message, None))
    return ContextDiff(lines)
