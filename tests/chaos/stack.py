"""The processes a fault test starts itself: its own PostgreSQL cluster and Redis server,
gunicorn, a Celery worker and Celery beat (the sweepers), all on free ports in a temporary
directory. The machine's shared PostgreSQL and Redis are never touched.

Everything started here is stopped by `close()` even when a test fails; PostgreSQL runs
as the `postgres` OS user (initdb refuses root), from a directory that user owns.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import psycopg

from tests.celery_worker import celery_worker_argv

ROOT = Path(__file__).resolve().parents[2]
# The broker and database settings of the CI leg are replaced, never inherited.
_LEG_VARIABLES = ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "SQLITE_PATH", "LLM_BASE_URL", "LLM_BACKEND")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(condition: Callable[[], bool], *, timeout: float, what: str, interval: float = 0.2) -> None:
    """Poll until `condition()` holds; generous timeouts, since the machine may be busy."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            if condition():
                return
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


def _pg_bin(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    if not found:
        raise RuntimeError(f"PostgreSQL's {name} not found under /usr/lib/postgresql/*/bin")
    return found[-1]


def _as_postgres(*command: str) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else list(command)


class PostgresCluster:
    """A throwaway cluster: initdb, pg_ctl start/stop/restart on a free port."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="memsite-chaos-pg-"))
        if os.geteuid() == 0:
            postgres = pwd.getpwnam("postgres")
            os.chown(self.dir, postgres.pw_uid, postgres.pw_gid)
        self.data = self.dir / "data"
        self.log = self.dir / "postgres.log"
        self.port = free_port()
        subprocess.run(
            _as_postgres(
                _pg_bin("initdb"), "-D", str(self.data), "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8"
            ),
            check=True,
            capture_output=True,
        )

    def _ctl(self, *args: str) -> None:
        options = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={self.dir} "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=100"
        )
        subprocess.run(
            _as_postgres(
                _pg_bin("pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-w", "-t", "120", "-o", options, *args
            ),
            check=True,
            capture_output=True,
        )

    def start(self) -> None:
        self._ctl("start")

    def restart(self) -> None:
        """A fast restart: open transactions are rolled back and their connections cut."""
        self._ctl("restart", "-m", "fast")

    def stop(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):
            self._ctl("stop", "-m", "immediate")

    def url(self, database: str) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}"

    def execute(self, statement: str, database: str = "postgres") -> None:
        with psycopg.connect(self.url(database), autocommit=True) as conn:
            conn.execute(statement)

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


class RedisServer:
    """`redis-server` with no persistence: a restart loses every queued message."""

    def __init__(self, directory: Path) -> None:
        self.port = free_port()
        self.directory = directory
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.process = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.directory),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for(lambda: self.cli("PING") == "PONG", timeout=30, what="redis-server")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=15)
        self.process = None

    def cli(self, *args: str) -> str:
        result = subprocess.run(
            ["redis-cli", "-p", str(self.port), *args], capture_output=True, text=True, timeout=15, check=False
        )
        return result.stdout.strip()


class BlackHole:
    """A TCP listener that accepts connections and never answers: a broker that hangs."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.held: list[socket.socket] = []
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def _accept(self) -> None:
        while not self.closed:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(conn)

    def close(self) -> None:
        self.closed = True
        for conn in [*self.held, self.sock]:
            with contextlib.suppress(OSError):
                conn.close()


class Service:
    """One child process (its own process group, so gunicorn's workers die with it); output to a log file."""

    def __init__(self, name: str, command: list[str], env: dict[str, str], log_dir: Path) -> None:
        self.name = name
        self.log_path = log_dir / f"{name}-{int(time.time() * 1000)}.log"
        self._log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True
        )

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL the whole process group: no cleanup, no on-commit callbacks, nothing flushed."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self) -> None:
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()
        else:
            # The leader exited; make sure no child of the group survives it.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signal.SIGKILL)
        self._log.close()


def base_env(work_dir: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key not in _LEG_VARIABLES}
    env.update(
        {
            "PYTHONUNBUFFERED": "1",
            "DJANGO_SETTINGS_MODULE": "memsite.settings",
            "DEBUG": "0",
            "MEMSITE_VAR_DIR": str(work_dir / "var"),
            # The sweepers run every second and re-send a pending run after 2 s, so a
            # lost message is found in seconds rather than minutes.
            "MEMSITE_SWEEP_INTERVAL": "1",
            "MEMSITE_COMPACTION_RESEND_AFTER": "2",
            "MEMSITE_FACTS_RESEND_AFTER": "2",
            "MEMSITE_BROKER_SEND_TIMEOUT": "2",
            "LOG_LEVEL": "INFO",
        }
    )
    return env


def manage(env: dict[str, str], *args: str) -> str:
    result = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
    return result.stdout


class Stack:
    """gunicorn + worker + beat against one database of a cluster and one Redis."""

    def __init__(self, *, cluster: PostgresCluster, database: str, api_key: str, work_dir: Path) -> None:
        self.cluster = cluster
        self.database = database
        self.api_key = api_key
        self.work_dir = work_dir
        (work_dir / "var").mkdir(parents=True, exist_ok=True)
        self.redis = RedisServer(work_dir)
        self.web_port = free_port()
        self.services: list[Service] = []
        self.web: Service | None = None
        self.worker: Service | None = None
        self.beat: Service | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.web_port}"

    def env(self, **overrides: str) -> dict[str, str]:
        env = base_env(self.work_dir)
        env["DATABASE_URL"] = self.cluster.url(self.database)
        env["REDIS_URL"] = self.redis.url
        env.update(overrides)
        return env

    def _start(self, name: str, command: list[str], env: dict[str, str]) -> Service:
        service = Service(name, command, env, self.work_dir)
        self.services.append(service)
        return service

    def start_web(self, *, workers: int = 2, wait: bool = True, **env: str) -> Service:
        self.web = self._start(
            "web",
            [
                sys.executable,
                "-m",
                "gunicorn",
                "memsite.wsgi",
                "--bind",
                f"127.0.0.1:{self.web_port}",
                "--workers",
                str(workers),
                "--timeout",
                "120",
                "--graceful-timeout",
                "5",
            ],
            self.env(**env),
        )
        if wait:
            web = self.web
            wait_for(lambda: self._web_answers(web), timeout=120, what="gunicorn to answer")
        return self.web

    def _web_answers(self, web: Service) -> bool:
        if not web.alive():
            raise AssertionError(f"gunicorn exited:\n{web.output()[-3000:]}")
        # Not /healthz: it waits on the broker, which some tests make hang on purpose.
        return httpx.get(f"{self.base_url}/api/v1/sessions/", timeout=5).status_code == 401

    def start_worker(self) -> Service:
        self.worker = self._start(
            "worker",
            celery_worker_argv(
                f"chaos-{self.web_port}@%h",
                "celery,compaction,facts,search",
                ["--pool", "threads", "--concurrency", "2"],
            ),
            self.env(),
        )
        worker = self.worker
        wait_for(lambda: "ready." in worker.output(), timeout=120, what="the Celery worker to start")
        return self.worker

    def start_beat(self) -> Service:
        self.beat = self._start(
            "beat",
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "memsite",
                "beat",
                "--loglevel",
                "INFO",
                "--schedule",
                str(self.work_dir / "beat-schedule"),
            ],
            self.env(),
        )
        return self.beat

    def query(self, statement: str, params: tuple | list = ()) -> list[tuple]:
        with psycopg.connect(self.cluster.url(self.database), autocommit=True, connect_timeout=10) as conn:
            return conn.execute(statement, params).fetchall()

    def close(self) -> None:
        for service in reversed(self.services):
            service.stop()
        self.redis.stop()
