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
        from memory_app.task_signals import connect_job_lifecycle
        from memsite import logs
        from memsite.celery import prepare_broker

        request_finished.connect(logs.clear_context, dispatch_uid="memsite.logs.clear_context")
        _register_system_checks()
        _forget_remembered_keys_on_change()
        connect_job_lifecycle()
        _plug_metrics_into_the_project()
        _register_job_kinds()

        prepare_broker()
        metrics_dir()  # every process writes its metric samples there


def _register_system_checks() -> None:
    """The project's setting checks (memsite.checks, plain functions: the project package imports
    no domain code but its URLconf, so the domain registers them) and the domain's own, run by
    `manage.py check` and at start-up."""
    from django.core.checks import Tags, register

    from memory_app.search.checks import check_vector_engine
    from memsite import checks

    register(checks.check_llm_base_url, Tags.security)
    register(checks.check_embeddings_base_url, Tags.security)
    register(checks.check_job_dispatcher)
    register(check_vector_engine, Tags.database)


def _plug_metrics_into_the_project() -> None:
    """memsite's request middleware counts every request, and its /metrics view answers a scrape,
    through what is registered here."""
    from memory_app.ops import metrics
    from memsite import metrics_hooks

    metrics_hooks.add_request_observer(metrics.observe_request)
    metrics_hooks.set_exposition(metrics.render_metrics)


def _forget_remembered_keys_on_change() -> None:
    """A key or team changed in this process is forgotten by its API-key cache at once."""
    from django.db.models.signals import post_delete, post_save

    from memory_app.tenancy import auth
    from memory_app.tenancy.models import ApiKey, Team

    for signal in (post_save, post_delete):
        signal.connect(auth.forget_saved_key, sender=ApiKey, dispatch_uid=f"forget-key-{signal is post_save}")
        signal.connect(auth.forget_saved_team, sender=Team, dispatch_uid=f"forget-team-{signal is post_save}")


def _register_job_kinds() -> None:
    """Each durable job kind is declared in its domain; registered here, in the order the ops pages
    list them, so that ops, the metrics and the retry paths find every kind by its key."""
    from memory_app import jobs
    from memory_app.compaction import services as compaction
    from memory_app.facts import extraction as fact_extraction
    from memory_app.search import services as search
    from memory_app.webhooks import services as webhooks

    for kind in (compaction.JOB, fact_extraction.JOB, search.JOB, webhooks.JOB):
        jobs.register(kind)
