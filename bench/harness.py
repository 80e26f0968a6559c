"""What the benches share, so that no bench imports from another one.

A dedicated PostgreSQL database (created, migrated, dropped), Django configured in the bench
process, gunicorn, a Celery worker, the scripted OpenAI-compatible LLM server of the tests in a
child process, process trees and their RSS, who used the CPU while a figure was taken and the wait
for a quiet machine, the data several benches seed (the API benches' session and floor tables,
generated experiences), the versions printed in each header, and each bench's figures written as
JSON beside its printed table (`--json PATH`, default var/bench/NAME.json).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import math
import os
import platform
import random
import re
import shlex
import socket
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Mapping
from contextlib import suppress
from pathlib import Path
from typing import Any

import httpx
import psycopg
import redis
from psycopg import sql

from tests.celery_worker import celery_worker_argv  # the one-off worker command the tests use too

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
HOST = "127.0.0.1"
JSON_DIR = ROOT / "var" / "bench"  # each bench's figures, as JSON (--json)


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


# --- who used the CPU: on 2 shared cores, other processes must not be measured as the product ---

CLK_TCK = os.sysconf("SC_CLK_TCK")
OTHERS = "other processes"


def machine_ticks() -> tuple[int, int]:
    """(busy, total) CPU ticks of the whole machine since boot; steal counts as busy."""
    values = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    idle = values[3] + values[4]  # idle + iowait
    return sum(values) - idle, sum(values)


def process_ticks(pid: int) -> int:
    """utime + stime of one process, in ticks (a process that is gone counts 0)."""
    with suppress(OSError, IndexError, ValueError):
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])
    return 0


def foreign_ticks(ours: set[int], db_name: str) -> dict[int, int]:
    """CPU ticks of every process that is not the bench's: not ours, not Redis, not
    PostgreSQL's own background processes, not a backend of the bench database."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in ours:
            continue
        with suppress(OSError, IndexError, ValueError):
            head, tail = (entry / "stat").read_text().rsplit(")", 1)
            command = head.split("(", 1)[1]
            if command.startswith("redis"):
                continue
            if command == "postgres":
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                client = "127.0.0.1(" in cmdline or "[local]" in cmdline
                if not client or f" {db_name} " in cmdline:
                    continue
            fields = tail.split()
            found[int(entry.name)] = int(fields[11]) + int(fields[12])
    return found


class CpuMeter:
    """Cores used by each named process, by other processes and by the machine, between
    start() and stop(). A shared 2-core machine must not be measured as the product."""

    def __init__(self, pids: dict[str, int], db_name: str) -> None:
        self.base = pids
        self.pids = dict(pids)
        self.db_name = db_name
        self.before: dict[str, int] = {}
        self.others: dict[int, int] = {}
        self.machine: tuple[int, int] = (0, 0)
        self.started = 0.0

    def start(self, **extra: int) -> None:
        self.pids = {**self.base, **extra}
        self.before = {name: process_ticks(pid) for name, pid in self.pids.items()}
        self.others = foreign_ticks(set(self.pids.values()), self.db_name)
        self.machine = machine_ticks()
        self.started = time.perf_counter()

    def stop(self) -> dict[str, float]:
        elapsed = time.perf_counter() - self.started
        busy, total = machine_ticks()
        cores = {name: (process_ticks(pid) - self.before[name]) / CLK_TCK / elapsed for name, pid in self.pids.items()}
        others = foreign_ticks(set(self.pids.values()), self.db_name)
        foreign = sum(ticks - self.others.get(pid, 0) for pid, ticks in others.items()) / CLK_TCK / elapsed
        machine = (busy - self.machine[0]) / max(total - self.machine[1], 1) * (os.cpu_count() or 1)
        cores["PostgreSQL, Redis, kernel"] = max(machine - sum(cores.values()) - foreign, 0.0)
        cores[OTHERS] = foreign
        cores["machine"] = machine
        return cores


def busy_share(seconds: float) -> float:
    """The machine's busy share over the next `seconds`."""
    busy, total = machine_ticks()
    time.sleep(seconds)
    busy_after, total_after = machine_ticks()
    return (busy_after - busy) / max(total_after - total, 1)


def wait_for_quiet(threshold: float, max_wait: float) -> float:
    """Wait (at most max_wait s) until the machine, with the bench idle, is below threshold busy;
    the last busy share seen. Other processes on a shared 2-core machine would otherwise be
    measured as the product."""
    deadline = time.monotonic() + max_wait
    share = busy_share(1.0)
    while share > threshold and time.monotonic() < deadline:
        share = busy_share(1.0)
    return share


def cores_text(cores: dict[str, float]) -> str:
    return ", ".join(f"{name} {value:.2f}" for name, value in cores.items())


# --- statistics --------------------------------------------------------------------------------


def pct(values: list[float], q: int) -> float:
    """The q-th percentile (1..99) of at least two values."""
    return statistics.quantiles(values, n=100)[q - 1]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


# --- the scripted LLM, in a child process ------------------------------------------------------


# A compaction's answer from the scripted LLM: what the compaction and load benches serve.
SUMMARY = json.dumps(
    {
        "user_request_summary": "The user asked for a deployment plan and its owners.",
        "summary": "Migrate the database, restart the workers one by one, switch the API; one step lacks an owner.",
        "salient_facts": ["migration first", "API switched last"],
        "open_threads": ["find an owner for the worker restart"],
        "keep_images": [],
    }
)


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


# --- the API benches' session and floors (api_bench, hot_path_profile) ----------------------------

SYSTEM_PROMPT = "You are a careful assistant that remembers what the team decided."
# A typical chat turn (~60 tokens): what agents append and what the windows hold.
CONTENT = (
    "Please summarise the deployment plan we agreed on yesterday: the database migration runs "
    "first, then the workers restart one at a time, and the API is switched over last. "
    "Note any step that still needs an owner."
)
APPEND_BODY = {"role": "user", "content": CONTENT}
SEED_ROLES = ("user", "assistant")


def bench_env(database_url: str) -> dict[str, str]:
    """The environment of the product with the floor endpoints mounted (MEMSITE_BENCH_FLOORS)."""
    return {
        "DJANGO_SETTINGS_MODULE": "memsite.settings",
        "DATABASE_URL": database_url,
        "DB_CONN_MAX_AGE": "600",
        "DEBUG": "0",
        "MEMSITE_BENCH_FLOORS": "1",
        "LOG_LEVEL": "WARNING",
        # Read by the limit floor as well, which checks keys with the product's own digest.
        "API_KEY_HMAC_SECRET": os.environ.get("API_KEY_HMAC_SECRET", "memsite-bench-api-key-digest-secret"),
    }


def seed_floor(rows: int) -> None:
    """The floor tables (bench/floor_tables.py), the read floor's holding `rows` rows."""
    from django.db import connection

    from bench import floor_tables as floors

    with connection.cursor() as cursor:
        for statement in floors.CREATE_TABLES_SQL:
            cursor.execute(statement)
        cursor.execute(
            f"INSERT INTO {floors.READ_TABLE} (grp, seq, role, content) "  # noqa: S608
            "SELECT %s, i, CASE WHEN i %% 2 = 1 THEN 'user' ELSE 'assistant' END, %s::json "
            "FROM generate_series(1, %s) AS i",
            [floors.READ_GROUP, json.dumps(CONTENT), rows],
        )


def seed_messages(session_id: str, count: int) -> None:
    """Bulk-insert `count` messages (alternating roles, cached token counts): no HTTP.

    The session's counters end as `count` appends would leave them.
    """
    from django.db import transaction
    from django.db.models import F

    from memory_app.conversations import counting
    from memory_app.conversations.models import Message, Session

    token_counts = {role: counting.message_tokens({"role": role, "content": CONTENT}) for role in SEED_ROLES}
    batch_size = 5_000
    with transaction.atomic():
        for start in range(1, count + 1, batch_size):
            rows = []
            for seq in range(start, min(start + batch_size, count + 1)):
                role = SEED_ROLES[(seq - 1) % 2]
                rows.append(
                    Message(
                        id=uuid.uuid4(),
                        session_id=session_id,
                        seq=seq,
                        role=role,
                        content=CONTENT,
                        token_count=token_counts[role],
                    )
                )
            Message.objects.bulk_create(rows)
        added = sum(token_counts[SEED_ROLES[(seq - 1) % 2]] for seq in range(1, count + 1))
        Session.objects.filter(pk=session_id).update(last_seq=count, active_tokens=F("active_tokens") + added)


# --- generated experiences (selection_bench, load) ---------------------------------------------

# TaskWeaver's roles first (`Planner`, `CodeInterpreter`); weights fall off with rank (a few busy
# roles, a long tail).
EXPERIENCE_ROLES = (
    "Planner CodeInterpreter code_generator reviewer tester sql_analyst data_engineer web_researcher "
    "summarizer translator designer devops security_auditor doc_writer qa_engineer product_manager "
    "support_agent data_scientist frontend_dev backend_dev"
).split()
ROLE_WEIGHTS = [1 / rank**0.9 for rank in range(1, len(EXPERIENCE_ROLES) + 1)]
ALL_ROLES_SHARE = 0.1  # `who` empty: for every role
ACTIONS = (
    "load|read|parse|clean|merge|plot|chart|summarise|translate|deploy|migrate|profile|debug|test|review|"
    "refactor|document|schedule|monitor|export|import|validate|benchmark|query|index|cache|retry|paginate|"
    "authenticate|encrypt"
).split("|")
TOPICS = (
    "a CSV file|an Excel workbook|a JSON payload|a parquet dataset|the sales database|a PostgreSQL table|"
    "a REST API|a GraphQL endpoint|the S3 bucket|a Docker image|the Kubernetes deployment|a Celery queue|"
    "the Redis cache|a pandas dataframe|a time series|a matplotlib figure|the web page|a PDF report|"
    "the unit tests|the CI pipeline|a pull request|the release notes|a log file|a stack trace|"
    "a FileNotFoundError|a timeout|the rate limit|an OAuth token|the user's calendar|an email thread|"
    "a customer ticket|the product roadmap|a Terraform plan|the nginx config|a cron job|the search index|"
    "a machine learning model|the training data|a confusion matrix|the API documentation"
).split("|")
QUALIFIERS = (
    "with missing values|that is larger than memory|in another language|for a non-technical reader|"
    "under a deadline|without network access|that failed yesterday|with personal data in it|"
    "across several regions|on a schedule|with inconsistent column names|from an untrusted source|"
    "that must stay backward compatible|in production|with flaky results|that has no tests"
).split("|")
SITUATIONS = (
    "a previous attempt raised an error|the result will be shown to a customer|the data comes from a spreadsheet|"
    "the task mentions performance|the user is in a hurry|the numbers look wrong|the code touches secrets|"
    "several agents work on the same files|the output must be reproducible|the request is ambiguous"
).split("|")
INSTRUCTIONS = (
    "Check that the file exists and print its first five rows before doing anything else.",
    "Use pandas.read_csv with an explicit encoding and dtype mapping; never guess the delimiter silently.",
    "Ask the user which column holds the dates when more than one looks like a date.",
    "Write the plot with matplotlib, label both axes with units, and save it as PNG at 150 dpi.",
    "Run the unit tests before and after the change and report both results.",
    "Prefer small, reversible migrations; add the column nullable first and backfill in batches of 10,000.",
    "Never print secrets or tokens; mask them as ****.",
    "Retry transient HTTP errors (429, 502, 503) three times with exponential backoff and jitter.",
    "Summarise in at most five bullet points, most important first, without jargon.",
    'Return the answer as JSON: {"status": "ok", "rows": <int>} and nothing else.',
    "Keep the original file untouched; write results to a new file with a timestamp suffix.",
    "Use UTC everywhere and say so in the output.",
    "When a query takes longer than two seconds, show its EXPLAIN ANALYZE and suggest an index.",
    "Translate technical terms only when a common translation exists; keep identifiers verbatim.",
    "Document every public function with a one-line summary and its parameters.",
    "Pin dependency versions in the Dockerfile and use a slim base image.",
    "Page through results with the cursor the API returns instead of offsets.",
    "Validate the input against the schema first and report every violation at once, with line numbers.",
    "Do not delete data; move it to an archive table and tell the user how to restore it.",
    "Explain what you changed and why in the pull request description, with a short test plan.",
    "Round money to two decimals only when displaying it; compute with Decimal.",
    "If the numbers look wrong, compare totals with the source system before reporting.",
    "Cache the result for ten minutes keyed by the normalised query.",
    "Stop and ask the user before running anything that writes to production.",
)
CODE_SNIPPETS = (
    "```python\ndf = pd.read_csv(path, encoding='utf-8', dtype={'id': 'string'})\nprint(df.head())\n```",
    "```python\nfor attempt in range(3):\n    try:\n        return call()\n    except Transient:\n"
    "        time.sleep(2 ** attempt + random.random())\n```",
    '```json\n{"status": "ok", "rows": 0, "errors": []}\n```',
    "```sql\nCREATE INDEX CONCURRENTLY idx_orders_customer ON orders (customer_id, created_at);\n```",
)


def make_who(rng: random.Random) -> list[str]:
    if rng.random() < ALL_ROLES_SHARE:
        return []
    count = rng.choices((1, 2, 3), weights=(6, 3, 1))[0]
    who: list[str] = []
    while len(who) < count:
        role = rng.choices(EXPERIENCE_ROLES, weights=ROLE_WEIGHTS)[0]
        if role not in who:
            who.append(role)
    return who


def make_when(rng: random.Random) -> str:
    """One or two sentences, ~80-350 characters: the situation an experience applies to."""
    text = f"When the user asks to {rng.choice(ACTIONS)} {rng.choice(TOPICS)}"
    if rng.random() < 0.7:
        text += f" {rng.choice(QUALIFIERS)}"
    if rng.random() < 0.5:
        text += f", or to {rng.choice(ACTIONS)} {rng.choice(TOPICS)}"
    text += "."
    if rng.random() < 0.6:
        text += f" Also applies when {rng.choice(SITUATIONS)} or when {rng.choice(SITUATIONS)}."
    return text


def make_what(rng: random.Random) -> str:
    """Two to eight instructions, sometimes with a code block: ~150-1,200 characters."""
    lines = [f"- {line}" for line in rng.sample(INSTRUCTIONS, rng.randint(2, 8))]
    if rng.random() < 0.3:
        lines.append(rng.choice(CODE_SNIPPETS))
    return "\n".join(lines)


def make_query(rng: random.Random) -> str:
    return (
        f"Please {rng.choice(ACTIONS)} {rng.choice(TOPICS)} {rng.choice(QUALIFIERS)}; "
        f"then {rng.choice(ACTIONS)} {rng.choice(TOPICS)} and tell me what you found."
    )


@dataclasses.dataclass
class SeededExperiences:
    experiences: int  # approved, in the measured team
    others: int  # drafts and disabled ones in the same team, and the other team's experiences
    candidates: dict[str, int]  # role -> approved experiences targeting it
    when_chars: list[int]
    what_chars: list[int]
    seconds: float


def seed_experiences(team: Any, other_team: Any, approved: int, rng: random.Random) -> SeededExperiences:
    """Through the services (a revision each, roles_key kept in step), as the import would."""
    from experiences_app import selectors, services
    from experiences_app.models import Experience

    started = time.perf_counter()
    approved_status, draft = Experience.Status.APPROVED, Experience.Status.DRAFT
    plan = (  # (team, status, how many, approved then disabled)
        (team, approved_status, approved, False),
        (team, approved_status, approved // 20, True),
        (team, draft, approved // 10, False),
        (other_team, approved_status, approved, False),
    )
    when_chars: list[int] = []
    what_chars: list[int] = []
    others = number = 0
    for owner, status, count, retire in plan:
        for _ in range(count):
            number += 1
            when, what = make_when(rng), make_what(rng)
            exp_id = f"{rng.choice(ACTIONS)}-{rng.choice(TOPICS).split()[-1].lower()}-{number:04d}"
            exp_id = "".join(c if c.isalnum() or c in "-_" else "-" for c in exp_id)
            experience = services.experience_create(
                team=owner, exp_id=exp_id, who=make_who(rng), when=when, what=what, actor="bench", status=status
            )
            if retire:
                services.experience_disable(experience=experience, actor="bench")
            if owner is team and status == approved_status and not retire:
                when_chars.append(len(when))
                what_chars.append(len(what))
            else:
                others += 1
    candidates = {role: len(selectors.experience_candidates(team=team, role=role)) for role in EXPERIENCE_ROLES}
    return SeededExperiences(approved, others, candidates, when_chars, what_chars, time.perf_counter() - started)


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


# --- each bench's figures as JSON, beside its printed table ----------------------------------------


def json_option(parser: argparse.ArgumentParser, bench: str) -> None:
    """`--json PATH`: where write_figures puts the bench's figures (default var/bench/NAME.json)."""
    parser.add_argument(
        "--json",
        type=Path,
        default=JSON_DIR / f"{bench}.json",
        metavar="PATH",
        help=f"write the figures as JSON to PATH as well (default: var/bench/{bench}.json)",
    )


def jsonable(value: Any) -> Any:
    """value as plain JSON: a dataclass as its fields (callables left out) and its properties, a
    mapping with string keys (a tuple key joined by spaces), a sequence or set as a list, a
    number that is not finite as null, anything else JSON does not know as its str()."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {
            field.name: jsonable(getattr(value, field.name))
            for field in dataclasses.fields(value)
            if not callable(getattr(value, field.name))
        }
        for name in dir(type(value)):
            if not name.startswith("_") and isinstance(getattr(type(value), name), property):
                with suppress(Exception):  # a property that cannot be computed (no samples) is left out
                    out[name] = jsonable(getattr(value, name))
        return out
    if isinstance(value, Mapping):
        return {
            (" ".join(str(part) for part in key) if isinstance(key, tuple) else str(key)): jsonable(item)
            for key, item in value.items()
        }
    if isinstance(value, bool | int | str) or value is None:
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, list | tuple | set | frozenset | deque):
        return [jsonable(item) for item in (sorted(value, key=str) if isinstance(value, set | frozenset) else value)]
    if hasattr(value, "item") and callable(value.item):  # a numpy scalar
        with suppress(TypeError, ValueError):
            return jsonable(value.item())
    return str(value)


def write_figures(path: Path, bench: str, figures: Mapping[str, Any]) -> Path:
    """Write a bench's figures to `path` as JSON, with when, where and how it ran: the printed
    table's numbers, for comparing runs and machines. Written whole (a temporary file renamed)."""
    document = {
        "bench": bench,
        "finished": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "command": " ".join([sys.argv[0], *map(shlex.quote, sys.argv[1:])]),
        "machine": machine_description(),
        "python": platform.python_version(),
        "figures": jsonable(figures),
    }
    path = path.resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(json.dumps(document, indent=1, allow_nan=False) + "\n")
    partial.replace(path)
    print(f"figures written to {path}", flush=True)
    return path
