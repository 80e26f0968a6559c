from django.apps import AppConfig


class MemoryAppConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "memory_app"
    verbose_name = "Conversation memory"

    def ready(self) -> None:
        # Registers the OpenAPI extension for the API key scheme.
        from memory_app.api import schema  # noqa: F401
        from memsite import checks  # noqa: F401  (registers the system checks)
        from memsite.celery import prepare_broker

        prepare_broker()
