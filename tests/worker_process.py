"""Child processes the tests start on the database and broker the tests themselves run on: a real
Celery worker (the `start_worker` fixture in tests/conftest.py) or gunicorn.

On the embedded defaults that is the SQLite test file and the filesystem broker; in CI's second
run, PostgreSQL and Redis. The worker reaches the scripted LLM server over HTTP.
"""

from __future__ import annotations

import os
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from django.conf import settings
from django.db import connection

from tests.celery_worker import celery_worker_argv

ROOT = Path(__file__).resolve().parents[1]


def wait_for(condition: Callable[[], bool], *, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def database_env() -> dict[str, str]:
    """Point a child process at the test database this test runs on."""
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        return {"SQLITE_PATH": db["NAME"], "DATABASE_URL": ""}
    user = db["USER"] or "postgres"
    return {"DATABASE_URL": f"postgres://{user}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"}


def process_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment, on the test database and var directory, plus `extra`."""
    return {
        **os.environ,
        **database_env(),
        "MEMSITE_VAR_DIR": str(settings.VAR_DIR),
        # The embedding backend the test process uses (the fast fake unless a test chose another).
        "EMBEDDINGS_BACKEND": settings.EMBEDDINGS_BACKEND,
        **(extra or {}),
    }


def llm_env(base_url: str, api_key: str = "sk-test-secret") -> dict[str, str]:
    """Settings that send a child process's LLM calls to the scripted server."""
    return {"LLM_BASE_URL": base_url, "LLM_API_KEY": api_key, "LLM_MODEL": "scripted-model", "LLM_TIMEOUT": "30"}


class Worker:
    """`celery worker` on every queue memsite uses; its output is kept in `lines`."""

    def __init__(self, env: dict[str, str], pool: str = "solo") -> None:
        self.name = f"test-{uuid.uuid4().hex[:8]}@%h"
        self.process = subprocess.Popen(
            celery_worker_argv(
                self.name,
                f"celery,{settings.COMPACTION_QUEUE},{settings.FACTS_QUEUE},{settings.SEARCH_QUEUE}",
                ["--pool", pool, "--concurrency", "2"],
            ),
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: list[str] = []
        threading.Thread(target=self._drain, daemon=True).start()
        wait_for(lambda: any("ready." in line for line in self.lines), timeout=60, what="worker start")

    def _drain(self) -> None:
        for line in self.process.stdout:
            self.lines.append(line)

    def tasks_finished(self, task: str) -> int:
        """Runs of `task` (e.g. "extract_facts") this worker has ended, as its log says: succeeded,
        failed or handed to a retry."""
        ended = (" succeeded in ", " raised ", " retry: ")
        return sum(f".{task}[" in line and any(word in line for word in ended) for line in self.lines)

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        stop(self.process)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def procfile_web_arguments() -> list[str]:
    """The gunicorn arguments of the Procfile's `web` process (what `make run` starts), from the
    application on, without its --bind."""
    line = next(line for line in (ROOT / "Procfile").read_text().splitlines() if line.startswith("web:"))
    words = shlex.split(line.partition(":")[2])
    arguments = words[words.index("memsite.wsgi") :]
    bind = arguments.index("--bind")
    del arguments[bind : bind + 2]
    return arguments


def start_gunicorn(env: dict[str, str], workers: int | None = None) -> tuple[subprocess.Popen[str], str]:
    """gunicorn as the Procfile runs it (its arguments, gunicorn.conf.py and its hooks), with
    `workers` if given, once its workers are up; the process and its base URL."""
    port = free_port()
    arguments = procfile_web_arguments()
    if workers is not None:
        arguments += ["--workers", str(workers)]  # the last one given wins
    workers = int([arguments[at + 1] for at, word in enumerate(arguments) if word == "--workers"][-1])
    process = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", *arguments, "--bind", f"127.0.0.1:{port}"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
    )

    def listening() -> bool:
        # A bare TCP connect: an HTTP probe would itself be counted in the metrics.
        assert process.poll() is None, "gunicorn exited during start-up"
        with socket.socket() as sock:
            return sock.connect_ex(("127.0.0.1", port)) == 0

    def children() -> int:
        return len(Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text().split())

    wait_for(listening, timeout=60, what="gunicorn to listen")
    wait_for(lambda: children() == workers, timeout=60, what=f"{workers} gunicorn workers")
    return process, f"http://127.0.0.1:{port}"


def stop(process: subprocess.Popen[str]) -> None:
    """SIGTERM (gunicorn's graceful stop), then SIGKILL if it has not exited in 30 s."""
    stop_all([process])


def stop_all(processes: Sequence[subprocess.Popen[str]]) -> None:
    """`stop` for several processes at once: each is asked first, so their graceful stops (a prefork
    worker's pool, gunicorn's workers) overlap instead of adding up."""
    for process in processes:
        process.send_signal(signal.SIGTERM)
    for process in processes:
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
