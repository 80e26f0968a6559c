from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.apps import AppConfig

if TYPE_CHECKING:
    from experiences_app.selectors import ExperienceUsage
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
