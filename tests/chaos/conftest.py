"""Fixtures of the fault tests: a throwaway PostgreSQL cluster for the whole run (migrated
once into a template database holding a team and its key), and per test a fresh database
cloned from it, a Redis server, and the web, worker and beat processes the test asks for."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.chaos.stack import PostgresCluster, Stack, base_env, manage

TEMPLATE = "memsite_chaos_template"
OUTCOMES: list[dict[str, object]] = []


@dataclass
class Template:
    cluster: PostgresCluster
    api_key: str
    clones: list[str] = field(default_factory=list)


@pytest.fixture(scope="session")
def template() -> Iterator[Template]:
    cluster = PostgresCluster()
    work = Path(tempfile.mkdtemp(prefix="memsite-chaos-setup-"))
    try:
        cluster.start()
        cluster.execute(f"CREATE DATABASE {TEMPLATE}")
        env = {**base_env(work), "DATABASE_URL": cluster.url(TEMPLATE), "CELERY_BROKER_URL": "memory://"}
        manage(env, "migrate", "--no-input")
        key = manage(env, "create_api_key", "--team", "chaos", "--role", "write").strip().splitlines()[-1]
        yield Template(cluster=cluster, api_key=key)
    finally:
        cluster.close()
        shutil.rmtree(work, ignore_errors=True)


@pytest.fixture
def stack(template: Template, request: pytest.FixtureRequest) -> Iterator[Stack]:
    """A fresh database and Redis; the test starts web, worker and beat when it needs them.
    Every process is stopped at teardown, failed test or not; the logs are kept on failure."""
    database = f"chaos_{len(template.clones)}"
    template.clones.append(database)
    template.cluster.execute(f"CREATE DATABASE {database} TEMPLATE {TEMPLATE}")
    work = Path(tempfile.mkdtemp(prefix=f"memsite-chaos-{request.node.name[:40]}-"))
    built = Stack(cluster=template.cluster, database=database, api_key=template.api_key, work_dir=work)
    try:
        built.redis.start()
        yield built
    finally:
        built.close()
        failed = getattr(request.node, "chaos_failed", False)
        if failed:
            print(f"\nchaos logs kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> object:
    report = yield
    if report.when == "call" and report.failed:
        item.chaos_failed = True  # type: ignore[attr-defined]
    return report


def record_outcome(test: str, *, acknowledged: int, present: int, duplicates: int, **extra: object) -> None:
    """One row of the outcome table (printed at the end of the run and kept in var/chaos-outcomes.json)."""
    row = {"test": test, "acknowledged": acknowledged, "present": present, "duplicates": duplicates, **extra}
    OUTCOMES.append(row)
    print(f"\nOUTCOME {json.dumps(row)}")
    out = Path(__file__).resolve().parents[2] / "var" / "chaos-outcomes.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(OUTCOMES, indent=2))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not OUTCOMES:
        return
    terminalreporter.section("fault tests: outcomes")
    terminalreporter.write_line(f"{'test':<48} {'acknowledged':>12} {'present':>8} {'duplicates':>10}  details")
    for row in OUTCOMES:
        details = ", ".join(
            f"{k}={v}" for k, v in row.items() if k not in {"test", "acknowledged", "present", "duplicates"}
        )
        terminalreporter.write_line(
            f"{row['test']:<48} {row['acknowledged']:>12} {row['present']:>8} {row['duplicates']:>10}  {details}"
        )
