"""The row locks of experience writes: an experience, a team's experiences, a team's settings."""

from __future__ import annotations

from experiences_app.models import Experience, TeamExperienceConfig
from memory_app.tenancy.models import Team


def experience_lock(*, experience_id: int) -> Experience:
    """The experience, row-locked until the transaction ends, read afresh.

    An edit, a status change and a rejection each check the stored status and revision, then
    write a new revision on them: the lock makes them take turns, so two reviewers never both
    act on the same revision. Raises Experience.DoesNotExist when it is gone.
    """
    return Experience.objects.select_for_update().get(pk=experience_id)


def team_experiences_lock(*, team: Team) -> list[Experience]:
    """Every experience of the team, row-locked until the transaction ends, in pk order.

    An import compares each file with what is stored and then writes: the locks keep edits
    from changing an experience in between. Taken in pk order, as any other writer locking
    several experiences must, so two imports never deadlock.
    """
    return list(Experience.objects.select_for_update().filter(team=team).order_by("pk"))


def experience_config_lock(*, team: Team) -> TeamExperienceConfig:
    """The team's experience settings, row-locked until the transaction ends (created when missing).

    A settings change merges what it is sent into what is stored: the lock makes two changes
    take turns, so neither undoes the other.
    """
    config, _ = TeamExperienceConfig.objects.select_for_update().get_or_create(team=team)
    return config
