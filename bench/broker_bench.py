"""Task dispatch on the embedded filesystem broker: kombu's stock transport against memsite's.

For each transport, a real `celery worker` (solo pool, the `celery` queue) on a fresh broker folder,
then N no-op tasks (`celery.accumulate`) sent one after the other, timed from the first send to the
worker's log line for the last success; plus the time of N bare sends (no worker) and of N
write+read round trips through the channel alone. Runs alternate between the two transports; the
medians are printed.

    .venv/bin/python bench/broker_bench.py --tasks 200 --runs 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.harness import ROOT, json_option, write_figures
from memsite.filesystem_broker import folder_options

TRANSPORTS = {
    "kombu filesystem": "kombu.transport.filesystem:Transport",
    "memsite filesystem_broker": "memsite.filesystem_broker:Transport",
}
# The worker is started with the transport chosen here rather than the one settings pick.
WORKER_MAIN = (
    "import sys; from memsite.celery import app; app.conf.broker_transport = sys.argv[1]; "
    "app.worker_main(['worker', '--pool', 'solo', '-Q', 'celery', '--without-gossip', '--without-mingle', "
    "'--without-heartbeat', '--loglevel', 'INFO', '-n', 'bench@%h'])"
)


def fresh_broker(var_dir: Path) -> Path:
    folder = var_dir / "broker"
    for name in ("queue", "processed", "control", "bad"):
        (folder / name).mkdir(parents=True, exist_ok=True)
    return folder


def connect(app: Any, transport: str, folder: Path) -> Any:
    return app.connection_for_write("filesystem://", transport=transport, transport_options=folder_options(folder))


def send_and_run(transport: str, var_dir: Path, tasks: int) -> float:
    """Seconds from the first send to the last task's success in a real worker."""
    from memsite.celery import app

    folder = fresh_broker(var_dir)
    env = {**os.environ, "MEMSITE_VAR_DIR": str(var_dir), "MEMSITE_BROKER_DIR": str(folder)}
    worker = subprocess.Popen(
        [sys.executable, "-c", WORKER_MAIN, transport],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    ready = threading.Event()
    all_done = threading.Event()

    def read_log() -> None:
        succeeded = 0
        assert worker.stdout is not None
        for line in worker.stdout:
            if " ready." in line:
                ready.set()
            if "celery.accumulate[" in line and "succeeded" in line:
                succeeded += 1
                if succeeded == tasks:
                    all_done.set()

    threading.Thread(target=read_log, daemon=True).start()
    try:
        if not ready.wait(60):
            raise RuntimeError("the worker did not start")
        with app.connection_for_write(
            "filesystem://", transport=transport, transport_options=folder_options(folder)
        ) as conn:
            started = time.perf_counter()
            for number in range(tasks):
                app.send_task("celery.accumulate", args=(number,), queue="celery", connection=conn)
            if not all_done.wait(120):
                raise RuntimeError("the worker did not run every task")
            return time.perf_counter() - started
    finally:
        worker.terminate()
        worker.wait(30)


def sends_only(transport: str, var_dir: Path, tasks: int) -> float:
    """Seconds to send `tasks` messages with no worker: the writer's cost alone."""
    from memsite.celery import app

    folder = fresh_broker(var_dir)
    with app.connection_for_write(
        "filesystem://", transport=transport, transport_options=folder_options(folder)
    ) as conn:
        started = time.perf_counter()
        for number in range(tasks):
            app.send_task("celery.accumulate", args=(number,), queue="celery", connection=conn)
        return time.perf_counter() - started


def channel_round_trips(transport: str, var_dir: Path, messages: int) -> float:
    """Seconds for `messages` put+get pairs through the channel alone (no Celery)."""
    from kombu import Connection

    folder = fresh_broker(var_dir)
    with Connection("filesystem://", transport=transport, transport_options=folder_options(folder)) as conn:
        channel = conn.default_channel
        payload = {"body": "e30=", "properties": {"delivery_tag": "t", "delivery_info": {}, "body_encoding": "base64"}}
        started = time.perf_counter()
        for _ in range(messages):
            channel._put("bench", dict(payload))
            channel._get("bench")
        return time.perf_counter() - started


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--runs", type=int, default=3)
    json_option(parser, "broker_bench")
    args = parser.parse_args(argv)
    os.environ.pop("DATABASE_URL", None)
    os.environ.pop("REDIS_URL", None)
    os.environ.pop("CELERY_BROKER_URL", None)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memsite.settings")
    measures = ("send + run in a worker", "sends only", "channel put+get")
    results: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="broker-bench-") as scratch:
        for run in range(args.runs):
            order = list(TRANSPORTS.items()) if run % 2 == 0 else list(reversed(TRANSPORTS.items()))
            for label, transport in order:
                var_dir = Path(scratch) / f"{run}-{label.split()[0]}"
                os.environ["MEMSITE_VAR_DIR"] = str(var_dir)
                results.setdefault((label, measures[0]), []).append(send_and_run(transport, var_dir, args.tasks))
                results.setdefault((label, measures[1]), []).append(sends_only(transport, var_dir / "s", args.tasks))
                results.setdefault((label, measures[2]), []).append(
                    channel_round_trips(transport, var_dir / "c", args.tasks)
                )
    print(f"broker bench: {args.tasks} tasks, {args.runs} runs, median seconds (each run's in brackets)")
    print("| transport | measure | median s | runs |")
    print("|---|---|---:|---|")
    for (label, measure), seconds in results.items():
        each = ", ".join(f"{value:.3f}" for value in seconds)
        print(f"| {label} | {measure} | {statistics.median(seconds):.3f} | {each} |")
    table = [
        {"transport": label, "measure": measure, "median_s": statistics.median(seconds), "runs_s": seconds}
        for (label, measure), seconds in results.items()
    ]
    write_figures(args.json, "broker_bench", {"tasks": args.tasks, "runs": args.runs, "table": table})
    return 0


if __name__ == "__main__":
    sys.exit(main())
