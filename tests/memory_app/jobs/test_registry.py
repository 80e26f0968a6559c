"""The registry of job kinds: every job task leads back to one registered kind, the ops pages list
every kind, and a kind is looked up by its key."""

from __future__ import annotations

import dataclasses
import inspect
from collections import Counter

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ImproperlyConfigured
from django.test import Client
from django.urls import reverse
from django.utils.module_loading import import_string

import memory_app.tasks  # noqa: F401  (registers the Celery tasks this reads)
from memory_app import jobs
from memory_app.compaction import services as compaction
from memsite.celery import app as celery_app
from memsite.errors import NotFound


def job_tasks() -> list[str]:
    """The memsite tasks that run one job: each takes the id of its job's row (sweepers take nothing)."""
    return sorted(
        name
        for name, task in celery_app.tasks.items()
        if name.startswith("memory_app.tasks.") and inspect.signature(task.run).parameters
    )


def test_every_task_that_runs_a_job_is_the_task_of_exactly_one_registered_kind() -> None:
    tasks_of_kinds = Counter(kind.task for kind in jobs.job_kinds())

    assert job_tasks() == [
        "memory_app.tasks.compact_session",
        "memory_app.tasks.deliver_webhook",
        "memory_app.tasks.extract_facts",
        "memory_app.tasks.index_search",
    ]
    assert {task: tasks_of_kinds[task] for task in job_tasks()} == dict.fromkeys(job_tasks(), 1)
    assert sorted(tasks_of_kinds) == job_tasks()  # and no kind names a task that does not exist


def test_each_kind_has_its_own_key_and_metric_label_and_a_retry_service_that_exists() -> None:
    kinds = jobs.job_kinds()

    assert [kind.kind for kind in kinds] == ["compaction", "facts", "search", "webhooks"]
    assert len({kind.metric_label for kind in kinds}) == len(kinds)
    for kind in kinds:
        assert kind.retry_service is not None and callable(import_string(kind.retry_service))


@pytest.mark.django_db
def test_the_ops_pages_list_every_registered_kind(client: Client) -> None:
    client.force_login(get_user_model().objects.create_user("operator", is_superuser=True))
    registered = [kind.kind for kind in jobs.job_kinds()]

    queues = client.get(reverse("dashboard:ops")).context["queues"]
    history = client.get(reverse("dashboard:ops_jobs")).context["kinds"]

    assert [queue.source.kind for queue in queues] == registered
    assert list(history) == registered


def test_a_kind_is_found_by_its_key_and_an_unknown_key_is_not_found() -> None:
    assert jobs.job_kind_get(kind="compaction") is compaction.JOB
    with pytest.raises(NotFound):
        jobs.job_kind_get(kind="summaries")


def test_a_second_kind_under_a_taken_key_or_task_is_refused() -> None:
    jobs.register(compaction.JOB)  # the same kind again (a second ready()): nothing changes

    with pytest.raises(ImproperlyConfigured, match="registered already"):
        jobs.register(dataclasses.replace(compaction.JOB, label="Compaction again"))
    with pytest.raises(ImproperlyConfigured, match="already the task of job kind 'compaction'"):
        jobs.register(dataclasses.replace(compaction.JOB, kind="summaries"))
    with pytest.raises(ImproperlyConfigured, match="url-safe"):
        jobs.register(dataclasses.replace(compaction.JOB, kind="Summaries!", task="memory_app.tasks.summaries"))
    assert [kind.kind for kind in jobs.job_kinds()] == ["compaction", "facts", "search", "webhooks"]


def test_retrying_a_kind_without_a_retry_service_is_not_found() -> None:
    no_retry = dataclasses.replace(compaction.JOB, retry_service=None)

    with pytest.raises(NotFound):
        jobs.job_retry(kind=no_retry, job=None)
