"""Compaction's dashboard pages: "Compact now", the revert of a run from the session page's
ledger, and the compaction panel alone, a partial the session page polls (static/js/dashboard.js
liveRegion), so a queued run is followed to done or failed without a reload. What the panel and
the ledger show is built in memory_app/compaction/panels.py.
"""

from __future__ import annotations

import uuid

from django.contrib import messages as flash
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from memory_app.compaction import panels as compaction_panels
from memory_app.compaction import selectors as compaction_selectors
from memory_app.compaction import services as compaction
from memory_app.compaction.models import CompactionRun
from memory_app.compaction.panels import compaction_panel
from memory_app.conversations import selectors
from memory_app.conversations.models import MemoryType, Session
from memory_app.dashboard.decorators import get_or_404, team_page
from memory_app.tenancy.models import Team
from memsite.errors import Conflict


def _team_session(team: Team, session_id: uuid.UUID) -> Session:
    return get_or_404(selectors.session_get, team=team, session_id=session_id)


def _panel_context(session: Session) -> dict[str, object]:
    return {
        "session": session,
        "panel": compaction_panel(session),
        "is_managed": session.memory_type == MemoryType.MANAGED_CONVERSATION,
    }


@team_page
@require_POST
def session_compact(request: HttpRequest, session_id: uuid.UUID, *, team: Team, teams: list[Team]) -> HttpResponse:
    """Queue a manual compaction now (the API's POST .../compact/).

    Back on the session page at its panel: the panel itself says the run is pending, then
    running, then how it ended, beside the button that queued it."""
    session = _team_session(team, session_id)
    try:
        run, created = compaction.compaction_request(session=session, trigger=CompactionRun.Trigger.MANUAL)
    except Conflict as exc:
        flash.error(request, exc.detail)
    else:
        if created:
            # Tagged, so the page removes it once the panel it polls says the run ended.
            flash.success(
                request,
                "Compaction queued: a worker will summarise the older messages shortly.",
                extra_tags="compaction",
            )
        else:
            flash.info(request, f"A compaction is already {run.status} for this session; nothing new was queued.")
    return redirect(reverse("dashboard:session", args=[session.pk]) + "#compaction-panel")


@team_page
def session_compaction_status(
    request: HttpRequest, session_id: uuid.UUID, *, team: Team, teams: list[Team]
) -> HttpResponse:
    """The panel, for the page to poll while a run is under way, with the ledger below it sent
    along: the page swaps the ledger in when the run's state changed, so the two never disagree."""
    session = _team_session(team, session_id)
    ledger = compaction_panels.session_ledger(session=session)
    latest = compaction_selectors.latest_done_run(session.pk)
    context = {
        **_panel_context(session),
        "runs": compaction_panels.run_views(ledger, latest=latest, on_page=set()),
        "more_runs": ledger.more_runs,
        "with_ledger": True,
    }
    return render(request, "memory_app/_compaction_panel_body.html", context)


def _back_to_compactions(session: Session) -> HttpResponse:
    return redirect(reverse("dashboard:session", args=[session.pk]) + "#compactions")


@team_page
@require_POST
def session_compaction_revert(
    request: HttpRequest, session_id: uuid.UUID, run_id: uuid.UUID, *, team: Team, teams: list[Team]
) -> HttpResponse:
    """Undo a compaction: the context goes back to the raw messages (or the previous summary)."""
    session = _team_session(team, session_id)
    run = get_or_404(compaction_selectors.compaction_run_get, session=session, run_id=run_id)
    try:
        compaction.compaction_revert(run=run)
    except Conflict as exc:
        flash.error(request, exc.detail)
    else:
        flash.success(
            request,
            "Compaction reverted: its summary no longer stands in for those messages. Automatic compaction "
            "waits for new messages (Compact now still works).",
        )
    return _back_to_compactions(session)
