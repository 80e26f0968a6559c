"""Teams and their API keys: creation, revocation, and deleting a team with every row it owns."""

from __future__ import annotations

from typing import Any

from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import transaction
from django.utils import timezone

from memory_app.tenancy.auth import generate_key, key_digest, key_prefix
from memory_app.tenancy.models import ApiKey, Team


def team_get_or_create(*, name: str) -> Team:
    team, _ = Team.objects.get_or_create(name=name)
    return team


def _admin_log_entries_of(team: Team) -> list[int]:
    """Ids of admin LogEntry rows about the team or any row it owns: their `object_repr`
    (a session's external id, an experience's exp_id, the team's name) is team data too."""
    from django.contrib.admin.models import LogEntry  # the admin app is optional to this module

    by_model: dict[type, dict[Any, list[int]]] = {}
    entries = LogEntry.objects.filter(content_type__app_label__in=("memory_app", "experiences_app"))
    for entry_id, content_type_id, object_id in entries.values_list("pk", "content_type_id", "object_id"):
        model = ContentType.objects.get_for_id(content_type_id).model_class()
        if model is None:
            continue
        try:
            pk = model._meta.pk.to_python(object_id)
        except (DjangoValidationError, ValueError, TypeError):
            continue
        by_model.setdefault(model, {}).setdefault(pk, []).append(entry_id)
    doomed: list[int] = []
    for model, ids in by_model.items():
        if model is Team:
            doomed += ids.get(team.pk, [])
            continue
        owner = "team" if any(f.name == "team" for f in model._meta.fields) else None
        if owner is None and any(f.name == "experience" for f in model._meta.fields):
            owner = "experience__team"
        if owner is None:
            continue
        for pk in model._base_manager.filter(pk__in=list(ids), **{owner: team}).values_list("pk", flat=True):
            doomed += ids[pk]
    return doomed


@transaction.atomic
def team_delete(*, team: Team) -> None:
    """Delete a team and every trace of it: sessions with all they hold, facts, jobs, events,
    keys, memberships, experiences and their selection logs (all by CASCADE from the team),
    and the admin log lines that named its rows. Users stay: they are people, not team data."""
    from django.contrib.admin.models import LogEntry

    from memory_app.search.services import index_after_purge  # the index sits above tenancy

    LogEntry.objects.filter(pk__in=_admin_log_entries_of(team)).delete()
    team.delete()
    transaction.on_commit(index_after_purge)


def api_key_create(
    *, team: Team, name: str = "", role: str = ApiKey.Role.WRITE, agent_name: str = ""
) -> tuple[ApiKey, str]:
    """Create a key; the raw key is returned once and never stored."""
    raw_key = generate_key()
    api_key = ApiKey.objects.create(
        team=team,
        name=name,
        role=role,
        agent_name=agent_name,
        prefix=key_prefix(raw_key),
        digest=key_digest(raw_key),
    )
    return api_key, raw_key


def api_key_revoke(*, api_key: ApiKey) -> ApiKey:
    if api_key.revoked_at is None:
        api_key.revoked_at = timezone.now()
        api_key.save(update_fields=["revoked_at"])
    return api_key
