from __future__ import annotations

import uuid
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.apps import AppConfig

if TYPE_CHECKING:
    from django.db.models import QuerySet

    from experiences_app.models import SelectionLog
    from experiences_app.selectors import ExperienceUsage
    from memory_app.search.documents import Doc
    from memory_app.tenancy.models import Team


class ExperiencesAppConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "experiences_app"
    verbose_name = "Experiences"

    def experience_usage(self, *, team: Team, **options: Any) -> dict[str, ExperienceUsage]:
        """How often each experience was a candidate and was selected: what memory_app's usage
        page shows. memory_app asks through this app config, so it never imports experiences_app."""
        from experiences_app.selectors import experience_usage  # models are ready by the time pages ask

        return experience_usage(team=team, **options)

    def agent_selection_counts(
        self, *, team: Team, agent: str | None = None, search: str | None = None
    ) -> list[tuple[str, uuid.UUID | None, int, datetime | None]]:
        """(role, session id, selections, latest) per role and session, one query: the selections
        memory_app's agents pages count per agent name (asked through here, never imported)."""
        from django.db.models import Count, Max

        from experiences_app.selectors import selection_log_list

        logs = selection_log_list(team=team, role=agent)
        if search:
            logs = logs.filter(role__icontains=search)
        rows = logs.values("role", "session_id").annotate(n=Count("pk"), last=Max("created_at")).order_by()
        return [(row["role"], row["session_id"], row["n"], row["last"]) for row in rows]

    def agent_selections(self, *, team: Team, agent: str) -> QuerySet[SelectionLog]:
        """The agent's (role's) selections, newest first, without the bulky prompt columns."""
        from experiences_app.selectors import selection_log_list

        return (
            selection_log_list(team=team, role=agent)
            .select_related("session")
            .defer("messages", "context", "raw_response")
        )

    def experience_search_documents(self, *, team_id: int | None) -> list[tuple[int, list[Doc]]]:
        """Every experience as recall indexes it, per team (all teams when `team_id` is None):
        what `manage.py reindex` rebuilds the index from."""
        from experiences_app.models import Experience
        from experiences_app.services import search_document

        experiences = Experience.objects.all() if team_id is None else Experience.objects.filter(team_id=team_id)
        teams: dict[int, list[Doc]] = {}
        for experience in experiences.order_by("pk"):
            teams.setdefault(experience.team_id, []).append(search_document(experience))
        return list(teams.items())
