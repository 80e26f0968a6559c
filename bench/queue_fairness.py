"""Queue fairness: an indexing backlog first, then one fact extraction, one compaction and one
webhook delivery; how long each waits to start and to finish, with the worker layout before (one
worker on every queue, concurrency 2, 60 s index runs), after (the Procfile's workers, the default
run slice), and "plain" (that one worker with the default run slice: a plain `celery -A memsite worker`).

Each leg runs in a child process on its own database and broker: "embedded" is what `make run`
uses (SQLite and the filesystem broker), "redis" PostgreSQL and Redis. Per leg: TEAMS teams of
SESSIONS conversations of MESSAGES chat turns each, embedded by the real offline model; then per
layout and repeat: the index state is reset, the layout's workers started (their exact commands),
each team's index run sent, and once the search slots are all busy, the three jobs are queued (the
scripted LLM server of the tests answers the extraction and the compaction, a local HTTP server
the delivery). Times come from the jobs' own rows (queued -> claimed -> done), median of the
repeats. No beat: nothing but the backlog and the three jobs runs.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

if __name__ == "__main__":  # `python bench/queue_fairness.py`: the repository root on the path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import redis
from psycopg import sql

from bench.harness import (
    ROOT,
    SUMMARY,
    LLMServer,
    admin_execute,
    drop_database,
    json_option,
    machine_description,
    migrate,
    seed_messages,
    serve_scripted_llm,
    setup_django,
    stop_process,
    wait_for_quiet,
    write_figures,
)
from tests.celery_worker import procfile_worker_argvs

JOBS = ("fact extraction", "compaction", "webhook delivery")
# The layout before issue 31: the Procfile's one worker on every queue, index runs of 60 s.
BEFORE = {
    "worker": [sys.executable, "-m", "celery", "-A", "memsite", "worker", "--loglevel", "INFO", "--concurrency", "2"]
}
BEFORE_ENV = {"MEMSITE_SEARCH_RUN_SECONDS": "60"}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--legs", default="embedded,redis", help="embedded (SQLite + filesystem broker), redis (PostgreSQL + Redis)"
    )
    parser.add_argument("--teams", type=int, default=3)
    parser.add_argument("--sessions", type=int, default=5, help="conversations per team")
    parser.add_argument("--messages", type=int, default=2000, help="chat turns per conversation")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--layouts", default="before,after,plain", help="before, after (the Procfile's), plain (one worker, 5 s slices)"
    )
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds a repeat may wait for the three jobs")
    parser.add_argument("--pg-url", default=os.environ.get("BENCH_PG_URL", "postgres://postgres@127.0.0.1:5432"))
    parser.add_argument("--redis-url", default=os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/13"))
    parser.add_argument("--db-name", default="memsite_queue_fairness")
    parser.add_argument("--leg", help=argparse.SUPPRESS)  # child mode: run this leg only
    parser.add_argument("--serve-llm", action="store_true", help=argparse.SUPPRESS)
    json_option(parser, "queue_fairness")
    return parser.parse_args(argv)


def llm_answer(body: dict[str, Any]) -> str:
    if "Ada works at Acme" in json.dumps(body):
        return json.dumps({"facts": [{"subject": "Ada", "predicate": "works at", "object": "Acme"}]})
    return SUMMARY


class _Receiver(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


class Workers:
    """The layout's worker processes (process name -> argv), each ready when this returns."""

    def __init__(self, commands: dict[str, list[str]], env: dict[str, str], log_dir: Path) -> None:
        self.processes: list[subprocess.Popen[bytes]] = []
        for name, argv in commands.items():
            log = log_dir / f"{name}-{uuid.uuid4().hex[:6]}.log"
            with log.open("wb") as out:
                self.processes.append(subprocess.Popen(argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT))
            deadline = time.monotonic() + 90
            while " ready." not in log.read_text(errors="replace"):
                if time.monotonic() > deadline or self.processes[-1].poll() is not None:
                    self.stop()
                    raise RuntimeError(f"{name} did not start:\n{log.read_text(errors='replace')[-3000:]}")
                time.sleep(0.2)

    def stop(self) -> None:
        """A cold shutdown (SIGQUIT): the index runs they hold are dropped, and reset before the next repeat."""
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGQUIT)
        for process in self.processes:
            stop_process(process, timeout=20)


def leg_env(leg: str, args: argparse.Namespace, workdir: Path, llm_url: str) -> dict[str, str]:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "memsite.settings",
        "MEMSITE_VAR_DIR": str(workdir),
        "DEBUG": "0",
        "LOG_LEVEL": "INFO",
        "LLM_BACKEND": "",
        "LLM_BASE_URL": llm_url,
        "LLM_API_KEY": "sk-bench",
        "LLM_MODEL": "scripted-model",
        "LLM_TIMEOUT": "60",
        "EMBEDDINGS_BACKEND": "",  # the real offline model
        "EMBEDDINGS_BASE_URL": "",
        "MEMSITE_WEBHOOK_ALLOW_PRIVATE_TARGETS": "1",
        "PYTHONUNBUFFERED": "1",
    }
    for name in ("MEMSITE_SEARCH_RUN_SECONDS", "MEMSITE_SEARCH_EMBED_BATCH", "SQLITE_PATH", "MEMSITE_BROKER_DIR"):
        env.pop(name, None)
    if leg == "embedded":
        return {**env, "DATABASE_URL": "", "REDIS_URL": "", "CELERY_BROKER_URL": ""}
    return {
        **env,
        "DATABASE_URL": f"{args.pg_url}/{args.db_name}",
        "REDIS_URL": args.redis_url,
        "CELERY_BROKER_URL": args.redis_url,
    }


class Scene:
    """The seeded data of a leg: the backlog's teams, and the job team's sessions and webhook."""

    def __init__(self, args: argparse.Namespace, receiver_url: str) -> None:
        from memory_app.conversations import services
        from memory_app.tenancy import services as tenancy
        from memory_app.webhooks import services as webhooks

        self.backlog_teams: list[int] = []
        for number in range(args.teams):
            team = tenancy.team_get_or_create(name=f"backlog-{number}")
            for _ in range(args.sessions):
                seed_messages(str(services.session_create(team=team).pk), args.messages)
            self.backlog_teams.append(team.pk)
        self.team = tenancy.team_get_or_create(name="jobs")
        self.kg = services.session_create(team=self.team, memory_type="kg")
        services.message_append(session=self.kg, messages=[{"role": "user", "content": "Ada works at Acme."}])
        self.webhook, _ = webhooks.webhook_create(team=self.team, url=receiver_url, actor="bench")
        self.managed: list[Any] = []
        for _ in range(len(args.layouts.split(",")) * args.repeats):  # one to compact per repeat and layout
            session = services.session_create(
                team=self.team, memory_type="managed_conversation", memory_config={"threshold_tokens": 1_000_000}
            )
            for turn in range(8):
                services.message_append(
                    session=session,
                    messages=[
                        {"role": "user", "content": f"question {turn} " + "word " * 30},
                        {"role": "assistant", "content": f"answer {turn} " + "text " * 30},
                    ],
                )
            self.managed.append(session)

    def queue_jobs(self) -> dict[str, tuple[Any, Any]]:
        """The three jobs, as (kind, job id), sent now."""
        from memory_app.compaction import services as compaction
        from memory_app.facts import extraction
        from memory_app.webhooks import services as webhooks

        facts_run = extraction.fact_extraction_request(session=self.kg)
        compaction_run, _ = compaction.compaction_request(session=self.managed.pop(), trigger="manual")
        delivery = webhooks.webhook_send_test(webhook=self.webhook, actor="bench")
        return {
            "fact extraction": (extraction.JOB, facts_run.pk),
            "compaction": (compaction.JOB, compaction_run.pk),
            "webhook delivery": (webhooks.JOB, delivery.pk),
        }


def reset_index(leg: str, args: argparse.Namespace, workdir: Path) -> None:
    """Every item unindexed again, no index run, no message left in the broker."""
    from memory_app.conversations.models import Session
    from memory_app.search.models import IndexRun, SearchItem

    SearchItem.objects.all().delete()
    IndexRun.objects.all().delete()
    Session.objects.update(search_indexed_seq=0)
    if leg == "redis":
        redis.Redis.from_url(args.redis_url).flushdb()
    else:
        for path in (workdir / "broker" / "queue").glob("*.msg"):
            path.unlink(missing_ok=True)


def one_repeat(
    leg: str, layout: str, args: argparse.Namespace, workdir: Path, env: dict[str, str], scene: Scene
) -> dict[str, Any]:
    from django.utils import timezone

    from memory_app.search import services as search
    from memory_app.search.models import IndexRun, SearchItem

    reset_index(leg, args, workdir)
    quiet = wait_for_quiet(0.3, 30)
    load = os.getloadavg()[0]
    commands = procfile_worker_argvs(ROOT / "Procfile") if layout == "after" else BEFORE
    slots = int(commands["indexer"][commands["indexer"].index("--concurrency") + 1]) if layout == "after" else 2
    slots = min(slots, len(scene.backlog_teams))  # one run per team at a time
    workers = Workers(commands, {**env, **(BEFORE_ENV if layout == "before" else {})}, workdir)
    try:
        for team_id in scene.backlog_teams:
            search.index_request(team_id=team_id, trigger=IndexRun.Trigger.REINDEX)
        deadline = time.monotonic() + 120
        while IndexRun.objects.filter(status=IndexRun.Status.RUNNING).count() < slots:
            if time.monotonic() > deadline:
                raise RuntimeError("the index runs did not start")
            time.sleep(0.1)
        time.sleep(1.0)  # the backlog is under way
        queued_at = timezone.now()
        sent = scene.queue_jobs()
        # Creating the three rows may itself wait: on SQLite, for the indexer's write transactions.
        sent_s = (timezone.now() - queued_at).total_seconds()
        results: dict[str, dict[str, float]] = {}
        deadline = time.monotonic() + args.timeout
        while len(results) < len(sent) and time.monotonic() < deadline:
            for name, (kind, job_id) in sent.items():
                if name in results:
                    continue
                row = kind.model._default_manager.get(pk=job_id)
                if row.status == kind.done:
                    claimed = getattr(row, kind.claimed_field)
                    finished = getattr(row, kind.finished_field or kind.done_at_field)
                    results[name] = {
                        "start_s": (claimed - queued_at).total_seconds(),
                        "finish_s": (finished - queued_at).total_seconds(),
                    }
            time.sleep(0.1)
        ended = timezone.now()
        indexed = SearchItem.objects.filter(state=SearchItem.State.INDEXED, indexed_at__lte=ended).count()
        left = SearchItem.objects.exclude(state=SearchItem.State.INDEXED).count()
        runs = IndexRun.objects.filter(status=IndexRun.Status.DONE).count()
    finally:
        workers.stop()
    missing = [name for name in sent if name not in results]
    return {
        "jobs": results,
        "sent_s": sent_s,
        "timed_out": missing,
        "busy_before": quiet,
        "load1": load,
        "items_indexed_by_then": indexed,
        "items_left": left,
        "index_runs_done": runs,
    }


def run_leg(leg: str, args: argparse.Namespace) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix=f"memsite-qfair-{leg}-"))
    (workdir / "staticfiles").mkdir()
    llm = LLMServer(Path(__file__))
    receiver = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    try:
        if leg == "redis":
            redis.Redis.from_url(args.redis_url).flushdb()
            drop_database(args.pg_url, args.db_name)
            admin_execute(args.pg_url, sql.SQL("CREATE DATABASE {}").format(sql.Identifier(args.db_name)))
        env = leg_env(leg, args, workdir, llm.base_url)
        migrate(env)
        setup_django({**env, "LOG_LEVEL": "WARNING"})
        started = time.monotonic()
        scene = Scene(args, f"http://127.0.0.1:{receiver.server_address[1]}/hook")
        backlog = args.teams * args.sessions * args.messages
        print(
            f"[{leg}] seeded {backlog:,} turns in {args.teams} teams in {time.monotonic() - started:.1f} s", flush=True
        )
        repeats: dict[str, list[dict[str, Any]]] = {layout: [] for layout in args.layouts.split(",")}
        for repeat in range(args.repeats):
            for layout in repeats:
                figures = one_repeat(leg, layout, args, workdir, env, scene)
                repeats[layout].append(figures)
                jobs = ", ".join(f"{n} {f['start_s']:.1f}/{f['finish_s']:.1f} s" for n, f in figures["jobs"].items())
                print(
                    f"[{leg}] {layout} #{repeat + 1}: start/finish {jobs}; "
                    f"timed out: {figures['timed_out'] or 'none'}; queued in {figures['sent_s']:.1f} s; "
                    f"busy {figures['busy_before']:.0%} before, load {figures['load1']:.2f}",
                    flush=True,
                )
        return {"backlog_turns": backlog, "repeats": repeats}
    finally:
        receiver.shutdown()
        llm.stop()
        if leg == "redis":
            from bench.harness import close_django_connections

            close_django_connections()
            drop_database(args.pg_url, args.db_name)


def medians(repeats: list[dict[str, Any]]) -> dict[str, dict[str, float | None]]:
    out: dict[str, dict[str, float | None]] = {}
    for name in JOBS:
        values = [r["jobs"][name] for r in repeats if name in r["jobs"]]
        complete = len(values) == len(repeats)
        out[name] = {
            key: (statistics.median(v[key] for v in values) if complete else None) for key in ("start_s", "finish_s")
        }
    return out


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.serve_llm:
        serve_scripted_llm(llm_answer)
        return 0
    if args.leg:
        figures = run_leg(args.leg, args)
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(figures))
        return 0
    print(f"queue fairness on {machine_description()}", flush=True)
    legs: dict[str, Any] = {}
    for leg in args.legs.split(","):
        child_json = Path(tempfile.mkdtemp(prefix="memsite-qfair-")) / f"{leg}.json"
        child = [sys.executable, str(Path(__file__).resolve()), *(argv if argv is not None else sys.argv[1:])]
        subprocess.run([*child, "--leg", leg, "--json", str(child_json)], cwd=ROOT, check=True)
        legs[leg] = json.loads(child_json.read_text())
    print(f"\nmedian of {args.repeats} runs, seconds from queued to started / to finished (backlog first):")
    print(f"{'leg':<9} {'layout':<7} " + " ".join(f"{name:>22}" for name in JOBS))
    for leg, figures in legs.items():
        for layout in figures["repeats"]:
            figures.setdefault("medians", {})[layout] = medians(figures["repeats"][layout])
            cells = []
            for name in JOBS:
                m = figures["medians"][layout][name]
                cells.append("timed out" if m["start_s"] is None else f"{m['start_s']:.1f} / {m['finish_s']:.1f}")
            print(f"{leg:<9} {layout:<7} " + " ".join(f"{cell:>22}" for cell in cells))
    write_figures(args.json, "queue_fairness", legs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
