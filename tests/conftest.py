"""Shared fixtures: teams, keys and authenticated clients, the scripted LLM server, real workers,
and the job dispatchers tests select instead of a broker."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.db.backends.postgresql.operations import DatabaseOperations as PostgresOperations
from rest_framework.test import APIClient

from memory_app.compaction import services as compaction
from memory_app.conversations import services
from memory_app.conversations.models import Session
from memory_app.jobs import JobKind, dispatchers
from memory_app.jobs.dispatchers import Sent
from memory_app.tenancy import services as tenancy
from memory_app.tenancy.models import ApiKey, Team
from tests import job_dispatch
from tests.job_dispatch import InlineWorker, Sends
from tests.worker_process import Worker, llm_env, process_env, stop_all

# Modules that use the database only to serve a client whose outcome is decided elsewhere: the
# reference library's differential tests compare the client's answers with marsys's, and the wheel
# test installs the client into a clean venv.
DATABASE_INDEPENDENT_MODULES = (
    "tests/memory_client/test_against_marsys.py",
    "tests/memory_client/test_managed_context_against_marsys.py",
    "tests/memory_client/test_message_formats_against_marsys.py",
    "tests/memory_client/test_wheel.py",
    "tests/memory_client/typescript/",
)
DATABASE_FIXTURES = frozenset({"db", "transactional_db", "live_server", "django_db_serialized_rollback"})


def _database_independent(item: pytest.Item) -> bool:
    """Whether the test's outcome cannot change with the database it runs on.

    True for a test that cannot reach the database at all (pytest-django refuses any query from a
    test that neither carries `django_db` nor asks for a database fixture), for the browser tours
    (the pages' queries run on both databases in the page tests without a browser), and for the
    modules above. Chaos tests start their own PostgreSQL and `every_leg` tests check the leg itself.
    """
    if item.get_closest_marker("chaos") or item.get_closest_marker("every_leg"):
        return False
    if item.get_closest_marker("browser") or item.nodeid.startswith(DATABASE_INDEPENDENT_MODULES):
        return True
    uses_database = item.get_closest_marker("django_db") or DATABASE_FIXTURES & set(getattr(item, "fixturenames", ()))
    return not uses_database


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _database_independent(item):
            item.add_marker(pytest.mark.database_independent)
    # A test of PostgreSQL's own engine code has nothing to check on SQLite: it is deselected there
    # (never skipped), and CI's PostgreSQL leg runs it.
    if django_settings.DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql":
        elsewhere = [item for item in items if item.get_closest_marker("postgresql")]
        if elsewhere:
            config.hook.pytest_deselected(items=elsewhere)
            items[:] = [item for item in items if not item.get_closest_marker("postgresql")]


@dataclass
class Tenant:
    team: Team
    key: str
    api_key: ApiKey
    client: APIClient


def make_tenant(name: str, role: str = ApiKey.Role.WRITE) -> Tenant:
    team = tenancy.team_get_or_create(name=name)
    api_key, raw = tenancy.api_key_create(team=team, name=f"{name}-key", role=role)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return Tenant(team=team, key=raw, api_key=api_key, client=client)


def managed_session(threshold: int = 300) -> Session:
    """A managed conversation of a team of its own, compacted past `threshold` tokens."""
    tenant = make_tenant(f"w-{uuid.uuid4().hex[:6]}")
    return services.session_create(
        team=tenant.team,
        system_prompt="You are a planner.",
        memory_type="managed_conversation",
        memory_config={"threshold_tokens": threshold},
    )


def fill(session: Session, turns: int = 6) -> None:
    """`turns` question/answer pairs of about 35 tokens each."""
    for i in range(turns):
        services.message_append(
            session=session,
            messages=[
                {"role": "user", "content": f"question {i} " + "word " * 30},
                {"role": "assistant", "content": f"answer {i} " + "text " * 30},
            ],
        )


def _delete_instead_of_truncate(
    self: Any, style: Any, tables: list[str], *, reset_sequences: bool = False, allow_cascade: bool = False
) -> list[str]:
    """PostgreSQL's flush as DELETE statements: the same empty tables, a hundred times sooner.

    A test that needs real commits (`transaction=True`, a live server) ends with a flush of every
    table. PostgreSQL's TRUNCATE of ~40 tables replaces their files and took 1-2.5 s each time,
    most of the PostgreSQL leg; deleting the few rows a test wrote takes milliseconds. Django's
    foreign keys are DEFERRABLE INITIALLY DEFERRED, and the flush runs in one transaction, so the
    order of the DELETEs does not matter. A flush that must reset sequences keeps TRUNCATE.
    """
    if reset_sequences or not tables:
        return _TRUNCATE_FLUSH(self, style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade)
    return [f"DELETE FROM {self.quote_name(table)};" for table in tables]  # noqa: S608 (Django's own table names, quoted)


_TRUNCATE_FLUSH = PostgresOperations.sql_flush


@pytest.fixture(scope="session", autouse=True)
def _fast_postgresql_flush() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(PostgresOperations, "sql_flush", _delete_instead_of_truncate)
        yield


@pytest.fixture(autouse=True)
def _context_ledger_written_at_once(settings) -> None:
    """Each context read's ledger row is in the database when its response is (tests that
    test the batching turn it back on)."""
    settings.CONTEXT_LEDGER_FLUSH_SECONDS = 0


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings) -> None:
    """Tests create many dashboard users with passwords; PBKDF2's million rounds cost about
    0.2 s a user. No test process but this one checks these passwords."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def tenant(db) -> Tenant:
    return make_tenant("alpha")


@pytest.fixture
def other_tenant(db) -> Tenant:
    return make_tenant("beta")


@pytest.fixture
def api(tenant: Tenant) -> APIClient:
    return tenant.client


@pytest.fixture
def admin_api(tenant: Tenant) -> APIClient:
    """An admin key of the same team as `api` (team settings, approvals and purges need one)."""
    _, raw = tenancy.api_key_create(team=tenant.team, name="alpha-admin", role=ApiKey.Role.ADMIN)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client


@pytest.fixture(autouse=True)
def _fake_embeddings(settings) -> None:
    """Recall embeds with the deterministic fake in tests; the tests of the offline model and of an
    embeddings server choose theirs."""
    settings.EMBEDDINGS_BACKEND = "memory_app.search.embeddings.fake.FakeEmbeddings"
    settings.SEARCH_INDEX_DELAY = 0.0  # index runs are due at once (tests run them themselves)


@pytest.fixture
def session_id(api: APIClient) -> str:
    response = api.post("/api/v1/sessions/", {"system_prompt": "You are helpful"}, format="json")
    assert response.status_code == 201, response.content
    return response.json()["id"]


@pytest.fixture
def llm_server(settings):
    """The scripted OpenAI-compatible server, configured as the LLM backend."""
    import json

    from tests.llm_server import ScriptedLLMServer

    answer = {
        "user_request_summary": "the requests",
        "summary": "what happened",
        "salient_facts": [],
        "open_threads": [],
        "keep_images": [],
    }
    server = ScriptedLLMServer(default=lambda body: json.dumps(answer)).start()
    settings.LLM_BASE_URL = server.base_url
    settings.LLM_API_KEY = "sk-test-secret"
    settings.LLM_MODEL = "scripted-model"
    settings.LLM_TIMEOUT = 5.0
    yield server
    server.stop()


@pytest.fixture
def job_outbox(settings) -> Iterator[list[Sent]]:
    """Every job's task is recorded here, (task name, job id, countdown), instead of going to a broker."""
    settings.JOB_DISPATCHER = "memory_app.jobs.dispatchers.RecordingDispatcher"
    dispatchers.outbox.clear()
    yield dispatchers.outbox
    dispatchers.outbox.clear()


@pytest.fixture
def sent_tasks(job_outbox: list[Sent]) -> Sends:
    """The compaction tasks recorded (in-process tests), as (run id, countdown)."""
    return Sends(job_outbox, compaction.JOB)


@pytest.fixture
def run_jobs_inline(job_outbox: list[Sent], settings) -> Iterator[Callable[[JobKind], InlineWorker]]:
    """Start an in-process worker for a job kind: its sends go to it, those of other kinds only
    to the outbox. Threads it started are joined after the test."""
    settings.JOB_DISPATCHER = "tests.job_dispatch.InlineDispatcher"
    job_dispatch.workers.clear()

    def start(kind: JobKind) -> InlineWorker:
        job_dispatch.workers[kind.task] = InlineWorker(kind)
        return job_dispatch.workers[kind.task]

    yield start
    for worker in job_dispatch.workers.values():
        worker.join()
    job_dispatch.workers.clear()


@pytest.fixture
def worker_env() -> dict[str, str]:
    """What a test module adds to the environment of the workers it starts (override it there)."""
    return {}


@pytest.fixture
def start_worker(llm_server, worker_env: dict[str, str]) -> Iterator[Callable[..., Worker]]:
    """Start real Celery worker processes (stopped after the test) that call the scripted LLM server."""
    env = process_env({**llm_env(llm_server.base_url), **worker_env})
    workers: list[Worker] = []

    def start(pool: str = "solo") -> Worker:
        workers.append(Worker(env, pool))
        return workers[-1]

    yield start
    stop_all([worker.process for worker in workers])
