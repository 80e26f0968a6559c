"""The token economics page: tokens memory work spent vs tokens compaction and windowing
saved, per team, session and agent, over time; the top sessions; experience hit-rates.

The chart is an SVG drawn by the template from geometry computed here (no chart library, no
JavaScript): two bars per day, spent and saved, on one scale.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Protocol, cast

from django import forms
from django.apps import apps
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone

from memory_app.conversations import selectors
from memory_app.conversations.models import Session
from memory_app.dashboard.decorators import get_or_404, team_page
from memory_app.dashboard.message_content import CompactMessage, compact_message
from memory_app.tenancy.models import Team
from memory_app.usage import selectors as usage_selectors
from memory_app.usage.models import ContextRecord
from memory_app.usage.selectors import DailyUsage, UsageFilter
from memory_client.vocabulary.messages import LLMMessage, content_text
from memory_client.vocabulary.wire import ServedPartInfo

TOP_SESSIONS = 8
CHART_WIDTH, CHART_HEIGHT, CHART_PAD = 760, 220, 34


class UsageFilterForm(forms.Form):
    days = forms.ChoiceField(
        choices=[(key, f"last {key} days") for key in usage_selectors.DAY_RANGES], required=False, initial="30"
    )
    session = forms.UUIDField(required=False)
    agent = forms.CharField(required=False, max_length=200)


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    value: int
    label: str


@dataclass(frozen=True)
class Chart:
    width: int
    height: int
    baseline: float
    spent: list[Bar]
    saved: list[Bar]
    ticks: list[tuple[float, str]]  # (y, label) of the value axis
    days: list[tuple[float, str]]  # (x, label) of the date axis, thinned to fit
    empty: bool


def _short(value: int) -> str:
    if value >= 1_000_000:
        return f"{value / 1_000_000:.1f}M"
    if value >= 1_000:
        return f"{value / 1_000:.1f}k"
    return str(value)


def usage_chart(days: list[DailyUsage]) -> Chart:
    """Bar geometry for spent and saved tokens per day, on one linear scale from 0."""
    top = max([max(d.spent_tokens, d.saved_tokens) for d in days] + [1])
    plot_w, plot_h = CHART_WIDTH - 2 * CHART_PAD, CHART_HEIGHT - 2 * CHART_PAD
    slot = plot_w / max(len(days), 1)
    bar_w = max(min(slot * 0.38, 18), 1.5)
    baseline = CHART_PAD + plot_h

    def bar(index: int, value: int, offset: float, day: DailyUsage) -> Bar:
        height = plot_h * value / top
        x = CHART_PAD + index * slot + slot / 2 + offset
        return Bar(x, baseline - height, bar_w, height, value, f"{day.day:%b %d}: {value:,} tokens")

    step = max(len(days) // 8, 1)
    return Chart(
        width=CHART_WIDTH,
        height=CHART_HEIGHT,
        baseline=baseline,
        spent=[bar(i, d.spent_tokens, -bar_w, d) for i, d in enumerate(days)],
        saved=[bar(i, d.saved_tokens, 0, d) for i, d in enumerate(days)],
        ticks=[(baseline - plot_h * share, _short(int(top * share))) for share in (0, 0.5, 1)],
        days=[(CHART_PAD + i * slot + slot / 2, f"{d.day:%b %d}") for i, d in enumerate(days) if i % step == 0],
        empty=all(d.spent_tokens == 0 and d.saved_tokens == 0 for d in days),
    )


@dataclass(frozen=True)
class HitRate:
    exp_id: str
    candidate: int
    selected: int

    @property
    def rate(self) -> int:
        return round(100 * self.selected / self.candidate) if self.candidate else 0


class _SelectionCounts(Protocol):
    candidate_30d: int
    selected_30d: int


class _ExperiencesConfig(Protocol):
    def experience_usage(self, *, team: Team) -> Mapping[str, _SelectionCounts]: ...


def _hit_rates(team: Team) -> list[HitRate]:
    # Experiences are an app built on memory_app: asked through its app config, never imported.
    if not apps.is_installed("experiences_app"):
        return []
    config = cast(_ExperiencesConfig, apps.get_app_config("experiences_app"))  # its config defines the method
    usage = config.experience_usage(team=team)
    rates = [HitRate(exp_id, u.candidate_30d, u.selected_30d) for exp_id, u in usage.items() if u.candidate_30d]
    return sorted(rates, key=lambda r: (-r.selected, -r.candidate, r.exp_id))


def _scope_session(team: Team, session_id: object) -> Session | None:
    if not session_id:
        return None
    return get_or_404(selectors.session_get, team=team, session_id=str(session_id))


@team_page
def usage_page(request: HttpRequest, *, team: Team, teams: list[Team]) -> HttpResponse:
    form = UsageFilterForm(request.GET or None)
    data = form.cleaned_data if form.is_valid() else {}
    days = usage_selectors.DAY_RANGES.get(data.get("days") or "30", 30)
    since, until = usage_selectors.default_range(timezone.now(), days=days)
    session = _scope_session(team, data.get("session"))
    agent = data.get("agent") or None
    scope = UsageFilter(team=team, since=since, until=until, session=session, agent=agent)
    by_session = usage_selectors.usage_groups(scope=scope, group_by="session")
    return render(
        request,
        "memory_app/usage.html",
        {
            "team": team,
            "teams": teams,
            "form": form,
            "days": days,
            "ranges": list(usage_selectors.DAY_RANGES),
            "session": session,
            "agent": agent,
            "totals": usage_selectors.usage_totals(scope=scope),
            "budget": usage_selectors.budget_status(team=team),
            "chart": usage_chart(usage_selectors.usage_daily(scope=scope)),
            "top_spend": [g for g in by_session if g.figures.spent_tokens][:TOP_SESSIONS],
            "top_saved": sorted(
                (g for g in by_session if g.figures.saved_tokens), key=lambda g: -g.figures.saved_tokens
            )[:TOP_SESSIONS],
            "by_agent": usage_selectors.usage_groups(scope=scope, group_by="agent"),
            "by_purpose": usage_selectors.usage_groups(scope=scope, group_by="purpose"),
            "hit_rates": _hit_rates(team) if session is None and agent is None else [],
        },
    )


DIFF_PREVIEW_CHARS = 160


@dataclass(frozen=True)
class DiffRow:
    status: str  # added | dropped | changed
    kind: str
    seq: int | None
    role: str
    before: str  # the message's text, shortened ("" when it has none on this side)
    after: str


@dataclass(frozen=True)
class DiffView:
    rows: list[DiffRow]  # only what differs
    added: int
    dropped: int
    changed: int
    same: int


@dataclass(frozen=True)
class ServedMessages:
    """A replay record's messages for the page, each as the active-context pane shows one."""

    messages: list[CompactMessage]
    diff: DiffView | None  # against the session's next served context
    next_context_id: uuid.UUID | None
    previous_context_id: uuid.UUID | None


def _message_view(message: LLMMessage, part: ServedPartInfo, session_url: str) -> CompactMessage:
    view = compact_message(message, on_page=set(), seq=part["seq"], tokens=part["token_count"], kind=part["kind"])
    # The raw message is on the session page, not this one.
    seq = part["seq"]
    href = f"{session_url}?after={seq - 1}#m{seq}" if seq is not None else ""
    return replace(view, href=href, truncated=part["truncated"])


def _preview(message: LLMMessage | None) -> str:
    if message is None:
        return ""
    text = " ".join(content_text(message.get("content")).split())
    if not text and message.get("tool_calls"):
        text = "calls " + ", ".join(str(call.get("function", {}).get("name")) for call in message["tool_calls"])
    return text if len(text) <= DIFF_PREVIEW_CHARS else text[: DIFF_PREVIEW_CHARS - 1] + "…"


def _diff_view(diff: usage_selectors.ContextDiff) -> DiffView:
    rows = [
        DiffRow(line.status, line.kind, line.seq, line.role, _preview(line.before), _preview(line.after))
        for line in diff.lines
        if line.status != "same"
    ]
    return DiffView(rows, len(diff.added), len(diff.dropped), len(diff.changed), diff.same)


def _served_messages(record: ContextRecord, session: Session, team: Team) -> ServedMessages:
    session_url = reverse("dashboard:session", args=[session.pk])
    body = record.body
    neighbours = usage_selectors.context_record_neighbours(record)
    following = usage_selectors.context_record_body(team=team, context_id=neighbours.next) if neighbours.next else None
    return ServedMessages(
        messages=[
            _message_view(message, part, session_url)
            for message, part in zip(body["messages"], body["parts"], strict=True)
        ],
        diff=_diff_view(usage_selectors.context_diff(body, following)) if following else None,
        next_context_id=neighbours.next,
        previous_context_id=neighbours.previous,
    )


@team_page
def served_context_page(request: HttpRequest, serve_id: int, *, team: Team, teams: list[Team]) -> HttpResponse:
    """One served context: what it held, part by part, and (while its replay record is kept) its
    messages exactly as served, with what the session's next served context changed."""
    serve = get_or_404(usage_selectors.served_context_get, team=team, serve_id=serve_id)
    record = usage_selectors.context_record_of(serve)
    return render(
        request,
        "memory_app/served_context.html",
        {
            "team": team,
            "teams": teams,
            "item": usage_selectors.served_breakdown(serve),
            "session": serve.session,
            "record": record,
            "served": _served_messages(record, serve.session, team) if record is not None else None,
            "record_days": settings.CONTEXT_RECORD_DAYS,
        },
    )


@team_page
def served_context_by_id_page(
    request: HttpRequest, context_id: uuid.UUID, *, team: Team, teams: list[Team]
) -> HttpResponse:
    """The page of the served context an API answer named by its `context_id`."""
    serve = get_or_404(usage_selectors.served_context_by_context_id, team=team, context_id=context_id)
    return redirect("dashboard:served_context", serve_id=serve.pk)
