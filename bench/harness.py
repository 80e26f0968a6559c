"""What the benches share: their database, the processes they start and the machine line.

A dedicated PostgreSQL database (created, migrated, dropped), Django configured in the bench
process, gunicorn, a Celery worker, the scripted OpenAI-compatible LLM server of the tests in a
child process, process trees and their RSS, and the versions printed in each header.
"""

from __future__ import annotations

import os
import platform
import re
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import Any

import httpx
import psycopg
import redis
from psycopg import sql

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
HOST = "127.0.0.1"


# --- database and Django -----------------------------------------------------------------------


def admin_execute(pg_url: str, statement: sql.Composable) -> None:
    with psycopg.connect(f"{pg_url}/postgres", autocommit=True) as conn:
        conn.execute(statement)


def create_database(pg_url: str, name: str) -> None:
    """A fresh, empty database `name` (any previous one is dropped)."""
    drop_database(pg_url, name)
    admin_execute(pg_url, sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def drop_database(pg_url: str, name: str) -> None:
    admin_execute(pg_url, sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def manage(env: dict[str, str], *args: str) -> str:
    """Run `manage.py args` with env; its stdout, or RuntimeError with both streams."""
    result = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
    return result.stdout


def migrate(env: dict[str, str]) -> None:
    manage(env, "migrate", "--no-input")


def setup_django(env: dict[str, str]) -> None:
    os.environ.update(env)
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()


def close_django_connections() -> None:
    from django.db import connections

    connections.close_all()


def settle_database() -> None:
    """After bulk seeding: fresh statistics, and the checkpoint written now rather than mid-run."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")
        cursor.execute("CHECKPOINT")


# --- gunicorn ----------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def start_gunicorn(
    env: dict[str, str], port: int, log_path: Path, workers: int = 2, app: str = "memsite.wsgi"
) -> subprocess.Popen[bytes]:
    """gunicorn as `make run` starts it (sync workers), on loopback; its output goes to log_path."""
    command = [
        str(BIN / "gunicorn"),
        app,
        "--chdir",
        str(ROOT),
        "--bind",
        f"{HOST}:{port}",
        "--workers",
        str(workers),
        "--worker-class",
        "sync",
        "--log-level",
        "warning",
    ]
    log = log_path.open("wb")
    return subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)


def wait_ready(
    url: str, headers: dict[str, str], server: subprocess.Popen[bytes], timeout: float = 30.0, *, name: str = "gunicorn"
) -> None:
    """Wait until GET url answers 200; fail when the server exits or the timeout passes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"{name} exited during start-up")
        try:
            response = httpx.get(url, headers=headers, timeout=2)
            if response.status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{name} did not answer within {timeout:.0f} s")


def stop_process(process: subprocess.Popen[Any], timeout: float = 15) -> None:
    """SIGTERM (a graceful shutdown for gunicorn and Celery), then SIGKILL after timeout."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


stop_gunicorn = stop_process


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


# --- process trees -----------------------------------------------------------------------------


def children_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry.name))
            except (OSError, IndexError, ValueError):
                continue
    return found


def process_tree(pid: int) -> list[int]:
    """pid and all its descendants (gunicorn's master and workers, Celery's and its pool)."""
    tree, frontier = [pid], [pid]
    while frontier:
        frontier = [child for parent in frontier for child in children_of(parent)]
        tree += frontier
    return tree


def rss_bytes(pids: list[int]) -> int:
    """Sum of VmRSS over the processes (shared pages count once per process, as `ps` shows them)."""
    total = 0
    for pid in pids:
        with suppress(OSError, ValueError):
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
                    break
    return total


# --- the scripted LLM, in a child process ------------------------------------------------------


def serve_scripted_llm(default: Callable[[dict[str, Any]], str]) -> None:
    """Child mode of a bench (`--serve-llm`): serve the tests' scripted LLM, answering every
    request at once with default(body), until the parent closes our stdin."""
    sys.path.insert(0, str(ROOT))
    from tests.llm_server import ScriptedLLMServer

    server = ScriptedLLMServer(default=default)
    server.requests = deque(maxlen=4)  # type: ignore[assignment]  # a 100k-message request is ~25 MB
    server.start()
    print(server.base_url, flush=True)
    sys.stdin.read()
    server.stop()


class LLMServer:
    """The scripted LLM server in a child process: `script --serve-llm` (each bench has its own answers)."""

    def __init__(self, script: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(script.resolve()), "--serve-llm"],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        self.base_url = self.process.stdout.readline().strip()
        if not self.base_url.startswith("http://127.0.0.1:"):
            self.stop()
            raise RuntimeError(f"the scripted LLM server did not start ({self.base_url!r})")

    def stop(self) -> None:
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


# --- the worker --------------------------------------------------------------------------------


def celery_worker_argv(name: str, queues: str, pool: list[str], loglevel: str = "INFO") -> list[str]:
    """`celery worker` as the benches and the tests start it: a one-off worker needs none of the
    cluster chatter (gossip, mingle, heartbeat), and it starts faster without it."""
    return [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "memsite",
        "worker",
        *pool,
        "--queues",
        queues,
        "--without-gossip",
        "--without-mingle",
        "--without-heartbeat",
        "--loglevel",
        loglevel,
        "-n",
        name,
    ]


class Worker:
    """One `celery worker` (`--pool solo` unless `concurrency` is given: then the prefork pool,
    as the Procfile runs it); its log lines are kept with the time they arrived."""

    def __init__(self, env: dict[str, str], queues: str, nice: int = 0, concurrency: int | None = None) -> None:
        pool = ["--pool", "solo"] if concurrency is None else ["--pool", "prefork", "--concurrency", str(concurrency)]
        self.process = subprocess.Popen(
            [
                *(["nice", "-n", str(nice)] if nice else []),
                *celery_worker_argv(f"cbench-{uuid.uuid4().hex[:6]}@%h", queues, pool),
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: list[tuple[float, str]] = []
        self._changed = threading.Condition()
        threading.Thread(target=self._drain, daemon=True).start()
        try:
            self.wait_line(re.compile(r"ready\."), start=0, timeout=60)
        except RuntimeError:
            self.stop()
            raise

    def _drain(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            arrived = time.perf_counter()
            with self._changed:
                self.lines.append((arrived, line))
                self._changed.notify_all()

    def mark(self) -> int:
        with self._changed:
            return len(self.lines)

    def wait_line(
        self,
        pattern: re.Pattern[str],
        *,
        start: int,
        timeout: float,
        accept: Callable[[re.Match[str]], bool] = lambda match: True,
    ) -> tuple[float, re.Match[str]]:
        """The arrival time and match of the first line from index `start` on that matches."""
        deadline = time.monotonic() + timeout
        index = start
        with self._changed:
            while True:
                while index < len(self.lines):
                    arrived, line = self.lines[index]
                    index += 1
                    match = pattern.search(line)
                    if match and accept(match):
                        return arrived, match
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self.process.poll() is not None:
                    tail = "".join(line for _, line in self.lines[-30:])
                    raise RuntimeError(f"worker: no line matching {pattern.pattern!r}; last lines:\n{tail}")
                self._changed.wait(min(remaining, 1.0))

    def stop(self) -> None:
        stop_process(self.process)


# --- the machine line of each report -----------------------------------------------------------


def machine_description() -> str:
    cpu = platform.processor() or "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{os.cpu_count()} cores ({cpu}), {platform.system()} {platform.release()}"


def pg_version(pg_url: str) -> str:
    with psycopg.connect(f"{pg_url}/postgres") as conn:
        row = conn.execute("SHOW server_version").fetchone()
    return f"PostgreSQL {row[0] if row else '?'}"


def server_versions(pg_url: str, redis_url: str) -> str:
    info = redis.Redis.from_url(redis_url).info("server")
    return f"{pg_version(pg_url)}, Redis {info.get('redis_version', '?')}"
