"""The Celery application; configuration comes from Django settings (CELERY_* names)."""

from __future__ import annotations

import os
from pathlib import Path

from celery import Celery
from celery.signals import before_task_publish, setup_logging, task_postrun, task_prerun

from memsite import logs

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memsite.settings")

app = Celery("memsite")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

# The request id travels from the request that sends a task to the worker that runs it.
before_task_publish.connect(logs.on_before_task_publish, weak=False)
task_prerun.connect(logs.on_task_prerun, weak=False)
task_postrun.connect(logs.on_task_postrun, weak=False)


@setup_logging.connect
def _use_django_logging(**_: object) -> None:
    """Keep Django's LOGGING (JSON or text, redacted) in the worker: with a receiver on this
    signal Celery configures no logging of its own."""
    import logging.config

    from django.conf import settings

    logging.config.dictConfig(settings.LOGGING)


@task_prerun.connect
def _drop_stale_connections(**_: object) -> None:
    """What Django does before each request: connections are reused across tasks
    (CELERY_DB_REUSE_MAX), so close one that errored or outlived CONN_MAX_AGE first."""
    from django.db import close_old_connections

    close_old_connections()


def prepare_broker() -> None:
    """Create the folders of the server-less filesystem broker (kombu does not).

    Called from an AppConfig.ready() so both the web process (which sends) and the worker
    (which consumes) have them before the first message.
    """
    options = app.conf.broker_transport_options or {}
    if not str(app.conf.broker_url).startswith("filesystem://"):
        return
    for key in ("data_folder_in", "data_folder_out", "processed_folder", "control_folder"):
        if options.get(key):
            Path(options[key]).mkdir(parents=True, exist_ok=True)
