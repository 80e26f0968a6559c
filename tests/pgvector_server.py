"""Databases for the vector engine's tests and the search bench, on the machine's own PostgreSQL:
one where the migration enables pgvector, and one where it cannot.

The server is DATABASE_URL's when that is a PostgreSQL URL, else the one .ci/run starts
(postgres://postgres@127.0.0.1:5432, trust authentication). pgvector comes from .ci/run's install
step, built from Debian's source package for generic x86-64 (docs/testing.md): the extension is
then available to every database of the server, and a migration run by a superuser enables it.

Without pgvector: pgvector's control file is not `trusted`, so only a superuser may create the
extension. A database owned by NO_PGVECTOR_ROLE (a role that may create databases, not
extensions) and migrated as that role keeps the exact-cosine engine, as a deployment whose
database role may not create extensions does (schema.install_pgvector's fallback).

Fixtures (import them into a test module): `pgvector_database_url` and
`no_pgvector_database_url`, each the DATABASE_URL of a new, empty database, dropped at the end of
the session. By hand:

    url = create_database("memsite_vectors", pgvector=True)   # postgres://postgres@127.0.0.1:5432/...
    drop_database("memsite_vectors")
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from psycopg import errors, sql

from memory_app.search.schema import MINIMUM_PGVECTOR

LOCAL_SERVER = "postgres://postgres@127.0.0.1:5432"
NO_PGVECTOR_ROLE = "memsite_no_pgvector"


def server_url(database: str = "postgres", *, user: str = "postgres", server: str | None = None) -> str:
    """The URL of `database`, as `user`, on `server` (any URL of it), by default the tests' server."""
    configured = server or os.environ.get("DATABASE_URL", "")
    parts = urlsplit(configured if configured.startswith(("postgres://", "postgresql://")) else LOCAL_SERVER)
    host = parts.hostname or "127.0.0.1"
    netloc = f"{user}@{host}:{parts.port or 5432}"
    return urlunsplit((parts.scheme, netloc, f"/{database}", "", ""))


def pgvector_version(server: str | None = None) -> tuple[int, ...] | None:
    """The version of pgvector the server offers (installed for it, not created in a database)."""
    with psycopg.connect(server_url(server=server)) as conn:
        row = conn.execute("SELECT default_version FROM pg_available_extensions WHERE name = 'vector'").fetchone()
    return None if row is None else tuple(int(part) for part in str(row[0]).split("."))


def _require_pgvector(server: str | None) -> None:
    version = pgvector_version(server)
    if version is None or version < MINIMUM_PGVECTOR:
        found = "no pgvector" if version is None else "pgvector " + ".".join(map(str, version))
        raise RuntimeError(
            f"the PostgreSQL server at {server_url(server=server)} has {found}; the vector engine needs "
            f"pgvector >= {'.'.join(map(str, MINIMUM_PGVECTOR))}: run .ci/run's install step (docs/testing.md)"
        )


def _ensure_no_pgvector_role(admin: psycopg.Connection) -> None:
    role = sql.Identifier(NO_PGVECTOR_ROLE)
    if not admin.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [NO_PGVECTOR_ROLE]).fetchone():
        # Another test process may create it between the question and the answer.
        try:
            admin.execute(sql.SQL("CREATE ROLE {} LOGIN CREATEDB NOSUPERUSER").format(role))
        except (errors.DuplicateObject, errors.UniqueViolation):
            pass
    # The search bench settles its database with a CHECKPOINT (PostgreSQL 15's pg_checkpoint role).
    if admin.execute("SELECT 1 FROM pg_roles WHERE rolname = 'pg_checkpoint'").fetchone():
        admin.execute(sql.SQL("GRANT pg_checkpoint TO {}").format(role))


def create_database(name: str, *, pgvector: bool, server: str | None = None) -> str:
    """Create an empty database and return its DATABASE_URL: as the superuser (the migration will
    enable pgvector, which the server must offer), or as NO_PGVECTOR_ROLE (it cannot)."""
    if pgvector:
        _require_pgvector(server)
    with psycopg.connect(server_url(server=server), autocommit=True) as admin:
        if pgvector:
            admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
            return server_url(name, server=server)
        _ensure_no_pgvector_role(admin)
        admin.execute(
            sql.SQL("CREATE DATABASE {} OWNER {}").format(sql.Identifier(name), sql.Identifier(NO_PGVECTOR_ROLE))
        )
    return server_url(name, user=NO_PGVECTOR_ROLE, server=server)


def drop_database(name: str, server: str | None = None) -> None:
    """Drop the database and the test database pytest-django makes of it (left by a killed run)."""
    with psycopg.connect(server_url(server=server), autocommit=True) as admin:
        for database in (name, f"test_{name}"):
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(database)))


def _database(prefix: str, *, pgvector: bool) -> Iterator[str]:
    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    url = create_database(name, pgvector=pgvector)
    try:
        yield url
    finally:
        drop_database(name)


@pytest.fixture(scope="session")
def pgvector_database_url() -> Iterator[str]:
    """DATABASE_URL of a new, empty database (no extension created yet) where the migration enables pgvector."""
    yield from _database("memsite_pgvector", pgvector=True)


@pytest.fixture(scope="session")
def no_pgvector_database_url() -> Iterator[str]:
    """DATABASE_URL of a new, empty database on the same server whose role may not create pgvector."""
    yield from _database("memsite_no_pgvector", pgvector=False)
