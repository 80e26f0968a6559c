"""The Celery application; configuration comes from Django settings (CELERY_* names)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from celery import Celery
from celery.signals import before_task_publish, setup_logging, task_postrun, task_prerun
from kombu import Exchange, Queue

from memsite import logs

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memsite.settings")

app = Celery("memsite")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

# The settings that name a queue some task is sent to (the job kinds in memory_app name them too).
QUEUE_SETTINGS = ("CELERY_TASK_DEFAULT_QUEUE", "COMPACTION_QUEUE", "FACTS_QUEUE", "SEARCH_QUEUE")


def memsite_queue_names() -> list[str]:
    """Every queue memsite sends tasks to: the default one first, then each job kind's and route's."""
    from django.conf import settings

    names = [str(getattr(settings, name)) for name in QUEUE_SETTINGS]
    names += [route["queue"] for route in settings.CELERY_TASK_ROUTES.values() if "queue" in route]
    return list(dict.fromkeys(names))


def _every_queue() -> dict[str, Any]:
    """`task_queues` is what a worker consumes when started without `-Q`: without it, a plain
    `celery -A memsite worker` (Celery's documented start) takes only the default queue and
    compaction, extraction and indexing jobs wait forever. `-Q compaction` still picks one.
    Declared like the queues Celery creates on demand (a direct exchange named after the queue),
    so messages already in a broker stay routable. A lazy default: read once settings are loaded,
    and a CELERY_TASK_QUEUES setting would still win."""
    return {"task_queues": [Queue(name, Exchange(name), routing_key=name) for name in memsite_queue_names()]}


app.add_defaults(_every_queue)

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
    """Connections are reused across tasks (CELERY_DB_REUSE_MAX), so close one that errored,
    outlived CONN_MAX_AGE or no longer answers (a restarted server) before the task runs: a
    ping per task is cheap beside the task, and a query failing mid-task would cost an attempt."""
    from django.db import close_old_connections, connections

    close_old_connections()
    for connection in connections.all(initialized_only=True):
        if connection.connection is not None and not connection.is_usable():
            connection.close()


def prepare_broker() -> None:
    """Create the folders of the server-less filesystem broker (kombu does not).

    Called from an AppConfig.ready() so both the web process (which sends) and the worker
    (which consumes) have them before the first message.
    """
    options = app.conf.broker_transport_options or {}
    if not str(app.conf.broker_url).startswith("filesystem://"):
        return
    for key in ("data_folder_in", "data_folder_out", "processed_folder", "control_folder", "quarantine_folder"):
        if options.get(key):
            Path(options[key]).mkdir(parents=True, exist_ok=True)
