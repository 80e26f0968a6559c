"""What every dashboard page shares: the current team (log-in, membership, the team switcher), the
team-admin rule for curation, the navigation's context and integer query parsing."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.functional import SimpleLazyObject
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from memory_app.tenancy import selectors as tenancy_selectors
from memory_app.tenancy.models import Team
from memsite.errors import NotFound

CURRENT_TEAM_KEY = "dashboard_team_id"


T = TypeVar("T")
TeamView = Callable[..., HttpResponse]


# Ids and seqs are 64-bit: a longer number in a URL would overflow the database column.
MAX_DB_INT = 2**63 - 1


def non_negative_int(value: str | None) -> int | None:
    """The integer a query or form value spells, if it is one the database can hold."""
    if not value or not value.isascii() or not value.isdigit() or len(value) > 19:
        return None
    number = int(value)
    return number if number <= MAX_DB_INT else None


def _pick_team(request: HttpRequest, teams: list[Team]) -> Team | None:
    chosen = request.session.get(CURRENT_TEAM_KEY)
    for team in teams:
        if team.pk == chosen:
            return team
    return teams[0] if teams else None


def get_or_404(lookup: Callable[..., T], /, **kwargs: Any) -> T:
    """`lookup(**kwargs)`, a selector's answer; its NotFound (a missing object, or another team's:
    selectors cannot tell them apart on purpose) is the page's 404. The one place pages map it."""
    try:
        return lookup(**kwargs)
    except NotFound as exc:
        raise Http404(str(exc)) from exc


def team_page(view: TeamView) -> TeamView:
    """Log-in required; calls `view(request, ..., team=, teams=)` with the user's current team."""

    @login_required
    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        teams = list(tenancy_selectors.team_list_for_user(user=request.user))
        # The navigation's ops link reads this rather than asking the database again.
        request.admin_team_ids = (  # type: ignore[attr-defined]
            None if request.user.is_superuser else [t.pk for t in teams if t.user_is_admin]  # type: ignore[attr-defined]
        )
        team = _pick_team(request, teams)
        if team is None:
            return render(request, "memory_app/no_team.html", status=403)
        return view(request, *args, team=team, teams=teams, **kwargs)

    return wrapper


def navigation(request: HttpRequest) -> dict[str, Any]:
    """Template context of every page: whether the nav offers the ops page (asked only when shown)."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {"sees_ops": False}

    def administers_a_team() -> bool:
        known = getattr(request, "admin_team_ids", False)  # set by team_page and ops_page
        return (known if known is not False else tenancy_selectors.admin_team_ids_for_user(user=user)) != []

    return {"sees_ops": SimpleLazyObject(administers_a_team)}


def team_admin_action(back_url_name: str) -> Callable[[TeamView], TeamView]:
    """A team page's POST that only the team's admins may make (the API asks an admin key for the
    same): 403, with a link back to `back_url_name`, for other members."""

    def decorate(view: TeamView) -> TeamView:
        @team_page
        @require_POST
        @wraps(view)
        def wrapper(request: HttpRequest, *args: Any, team: Team, teams: list[Team], **kwargs: Any) -> HttpResponse:
            if not tenancy_selectors.user_is_team_admin(user=request.user, team=team):
                context = {"team": team, "teams": teams, "back_url_name": back_url_name}
                return render(request, "memory_app/team_admin_only.html", context, status=403)
            return view(request, *args, team=team, teams=teams, **kwargs)

        return wrapper

    return decorate


@login_required
@require_POST
def switch_team(request: HttpRequest) -> HttpResponse:
    """Make another of the user's teams the current one (never a team they are not in)."""
    team_id = non_negative_int(request.POST.get("team"))
    if team_id is None or not tenancy_selectors.team_list_for_user(user=request.user).filter(pk=team_id).exists():
        raise Http404("You are not a member of this team.")
    request.session[CURRENT_TEAM_KEY] = team_id
    # Pages of the previous team would 404 now, so go back to the list.
    return redirect("dashboard:sessions")


def redirect_back(request: HttpRequest, fallback: str) -> HttpResponse:
    """Back to the page the form was on (`next`, same site only), else `fallback`."""
    target = request.POST.get("next", "")
    if target and url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}):
        return redirect(target)
    return redirect(fallback)
