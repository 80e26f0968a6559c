from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.apps import AppConfig

if TYPE_CHECKING:
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
