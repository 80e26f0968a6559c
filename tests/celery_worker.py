"""How the tests start a one-off `celery worker`, and the benches too (bench/harness.py imports
this module; the tests never import the benches). Standard library only: no Django, no Celery.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path


def celery_worker_argv(name: str, queues: str, pool: list[str], loglevel: str = "INFO") -> list[str]:
    """`celery worker` as the tests and the benches start it: a one-off worker needs none of the
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


def procfile_worker_argvs(procfile: Path, name_suffix: str = "") -> dict[str, list[str]]:
    """The Celery workers of the Procfile (what `make run` starts), by process name: each line's
    command after its `keep_running ... --` wrapper, run with this Python, each worker's `-n` name
    followed by `name_suffix` (a test's workers must not share a node name with another's)."""
    workers: dict[str, list[str]] = {}
    for line in procfile.read_text().splitlines():
        process, _, command = line.partition(":")
        words = shlex.split(command)
        words = words[words.index("--") + 1 :] if "--" in words else words
        if len(words) < 4 or not words[0].endswith("celery") or "worker" not in words:
            continue
        argv = [sys.executable, "-m", "celery", *words[1:]]
        if "-n" in argv:
            at = argv.index("-n") + 1
            node, _, host = argv[at].partition("@")
            argv[at] = f"{node}{name_suffix}@{host}"
        workers[process.strip()] = argv
    return workers
