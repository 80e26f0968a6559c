"""Which teams a browser user belongs to and administers, and what a team holds."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db.models import Exists, OuterRef, QuerySet

from memory_app.conversations.models import Message
from memory_app.tenancy.models import Team, TeamMembership


def team_list_for_user(*, user: Any) -> QuerySet[Team]:
    """The teams a browser user belongs to: the only teams the dashboard may show them, each
    with `user_is_admin` (the user's role in it), in the same query."""
    admin = TeamMembership.objects.filter(team=OuterRef("pk"), user=user, is_admin=True)
    return Team.objects.filter(members=user).annotate(user_is_admin=Exists(admin)).order_by("name")


def user_is_team_admin(*, user: Any, team: Team) -> bool:
    """Whether the user may curate `team` (approve, edit, invalidate, retry): an admin member of
    that team, or a superuser. The global staff flag gives no right over any team's data.
    A team from `team_list_for_user` already knows the answer; any other team costs a query."""
    if user.is_superuser:
        return True
    known = getattr(team, "user_is_admin", None)
    if known is not None:
        return bool(known)
    return TeamMembership.objects.filter(team=team, user=user, is_admin=True).exists()


def admin_team_ids_for_user(*, user: Any) -> list[int] | None:
    """The teams whose background jobs the user may watch and retry; None means every team
    (superusers only)."""
    if user.is_superuser:
        return None
    return list(TeamMembership.objects.filter(user=user, is_admin=True).values_list("team_id", flat=True))


def team_row_counts(*, team_ids: Sequence[int]) -> dict[str, int]:
    """How many rows of each kind the teams own (models with a `team` foreign key, plus
    messages), by plural verbose name, leaving out kinds with none: the admin's summary of
    what deleting the teams removes."""
    from django.apps import apps

    counts: dict[str, int] = {}
    models = [m for m in apps.get_models() if any(f.name == "team" and f.is_relation for f in m._meta.fields)]
    for model in models:
        counts[str(model._meta.verbose_name_plural)] = model._base_manager.filter(team_id__in=team_ids).count()
    counts[str(Message._meta.verbose_name_plural)] = Message.objects.filter(session__team_id__in=team_ids).count()
    return {name: count for name, count in sorted(counts.items()) if count}
