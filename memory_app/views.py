"""Dashboard pages (server-rendered)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from memory_app import selectors
from memory_app.models import Team
from memsite.errors import NotFound


def current_team(request: HttpRequest) -> Team:
    team = request.user.teams.order_by("name").first()
    if team is None:
        raise Http404("You are not a member of any team.")
    return team


@login_required
def session_list(request: HttpRequest) -> HttpResponse:
    team = current_team(request)
    sessions = selectors.session_list(team=team, search=request.GET.get("q") or None)[:200]
    return render(request, "memory_app/session_list.html", {"team": team, "sessions": sessions})


@login_required
def session_detail(request: HttpRequest, session_id: str) -> HttpResponse:
    team = current_team(request)
    try:
        session = selectors.session_get(team=team, session_id=session_id)
    except NotFound as exc:
        raise Http404(str(exc)) from exc
    page = selectors.message_page(session=session, limit=500)
    return render(request, "memory_app/session_detail.html", {"team": team, "session": session, "page": page})
