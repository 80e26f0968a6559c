"""Reads of the token-economics ledgers: spend on LLM work beside savings of served contexts.

"Spent" is prompt + completion tokens of memsite's own LLM calls (summaries, fact extraction,
experience selection). "Saved" is, per context served, the tokens of the raw history it
stands for minus the tokens it holds: what compaction and windowing kept out of the agent's
own LLM requests. Every aggregate is one GROUP BY query per ledger.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from datetime import UTC, date, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Count, F, Manager, Q, QuerySet, Sum, Value
from django.db.models.functions import Coalesce, Greatest, TruncDate
from django.utils import timezone

from memory_app.conversations.models import Session
from memory_app.tenancy.models import Team
from memory_app.usage.models import ContextServe, LLMCall
from memsite.errors import NotFound

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
_CONTEXT_AGGREGATES = {
    _PREFIX + "contexts_served": Count("id"),
    _PREFIX + "raw_tokens": Coalesce(Sum("raw_tokens"), 0),
    _PREFIX + "served_tokens": Coalesce(Sum("served_tokens"), 0),
    _PREFIX + "saved_tokens": _SAVED,
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


def served_context_get(*, team: Team, serve_id: int) -> ContextServe:
    """One served context of the team (another team's is NotFound, as a missing one)."""
    try:
        return ContextServe.objects.select_related("session").get(team=team, pk=serve_id)
    except ContextServe.DoesNotExist as exc:
        raise NotFound("Served context not found.") from exc
