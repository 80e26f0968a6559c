"""How the tests start a one-off `celery worker`, and the benches too (bench/harness.py imports
this module; the tests never import the benches). Standard library only: no Django, no Celery.
"""

from __future__ import annotations

import sys


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
