"""Both vector engines of PostgreSQL, each in a process of its own on the machine's server: the
indexing and search tests run again on a database where the migration enabled pgvector (HNSW), and
on one whose role may not create the extension (the in-process index of test_ann.py, exact cosine
for small teams), with pgvector_checks.py's checks that only mean something there. The search
tests check the engine themselves when MEMSITE_EXPECT_PGVECTOR is "1".

They run in CI's PostgreSQL leg (marker `pgvector`), whose own database gets pgvector too, since
the server has it (docs/testing.md).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.pgvector_server import no_pgvector_database_url, pgvector_database_url  # noqa: F401 (fixtures)

ROOT = Path(__file__).resolve().parents[3]
# Node ids relative to ROOT, the child's working directory: --deselect matches them as pytest writes them.
HERE = "tests/memory_app/search"
SEARCH_TESTS = (f"{HERE}/test_search_api.py", f"{HERE}/test_indexing.py")
ANN_TESTS = f"{HERE}/test_ann.py"  # the in-process vector index, end to end where it serves
CHECKS = f"{HERE}/pgvector_checks.py"
WITHOUT_PGVECTOR_CHECK = f"{CHECKS}::test_without_pgvector_postgresql_searches_by_exact_cosine"
# Variables of the caller's environment that would point the run at another database or broker.
_FOREIGN = ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "MEMSITE_VAR_DIR", "MEMSITE_EXPECT_PGVECTOR")

pytestmark = [pytest.mark.slow, pytest.mark.pgvector]


def run_tests(database_url: str, var_dir: Path, expect_pgvector: bool, *targets: str) -> None:
    env = {key: value for key, value in os.environ.items() if key not in _FOREIGN and not key.startswith("PG")}
    env |= {
        "DATABASE_URL": database_url,
        "MEMSITE_VAR_DIR": str(var_dir),
        "MEMSITE_EXPECT_PGVECTOR": "1" if expect_pgvector else "0",
    }
    command = [sys.executable, "-m", "pytest", *targets, "-q", "-p", "no:cacheprovider", "-o", "addopts=-ra"]

    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False)

    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
    assert " passed" in result.stdout and "skipped" not in result.stdout, result.stdout[-2000:]


def test_indexing_and_search_pass_on_pgvector(pgvector_database_url: str, tmp_path: Path) -> None:  # noqa: F811
    run_tests(
        pgvector_database_url,
        tmp_path / "var",
        True,
        *SEARCH_TESTS,
        CHECKS,
        "--deselect",
        WITHOUT_PGVECTOR_CHECK,
    )


def test_indexing_and_search_pass_on_postgresql_without_pgvector(
    no_pgvector_database_url: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    run_tests(no_pgvector_database_url, tmp_path / "var", False, *SEARCH_TESTS, ANN_TESTS, WITHOUT_PGVECTOR_CHECK)
