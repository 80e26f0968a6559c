from django.apps import AppConfig


class MemoryAppConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "memory_app"
    verbose_name = "Conversation memory"

    def ready(self) -> None:
        from django.core.signals import request_finished

        # Registers the OpenAPI extension for the API key scheme.
        from memory_app.api import schema  # noqa: F401
        from memory_app.ops.metrics import metrics_dir
        from memsite import (
            checks,  # noqa: F401  (registers the system checks)
            logs,
        )
        from memsite.celery import prepare_broker

        request_finished.connect(logs.clear_context, dispatch_uid="memsite.logs.clear_context")

        prepare_broker()
        metrics_dir()  # every process writes its metric samples there
