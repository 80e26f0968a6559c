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
        _forget_remembered_keys_on_change()

        prepare_broker()
        metrics_dir()  # every process writes its metric samples there


def _forget_remembered_keys_on_change() -> None:
    """A key or team changed in this process is forgotten by its API-key cache at once."""
    from django.db.models.signals import post_delete, post_save

    from memory_app.tenancy import auth
    from memory_app.tenancy.models import ApiKey, Team

    for signal in (post_save, post_delete):
        signal.connect(auth.forget_saved_key, sender=ApiKey, dispatch_uid=f"forget-key-{signal is post_save}")
        signal.connect(auth.forget_saved_team, sender=Team, dispatch_uid=f"forget-team-{signal is post_save}")
