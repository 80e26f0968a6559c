"""What API-key authentication costs per request, on the configured database.

Prints the median of several runs of: the keyed digest alone, the full `find_active_key`
(prefix lookup by unique index + digest compare), and, as the floor, a bare primary-key
read of the same table. Run: `.venv/bin/python bench/auth_bench.py` (add DATABASE_URL=...
to measure on PostgreSQL).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.harness import json_option, write_figures

RUNS = 5
CALLS = 2000


def per_call_us(fn: Callable[[], object]) -> float:
    samples = []
    for _ in range(RUNS):
        start = time.perf_counter()
        for _ in range(CALLS):
            fn()
        samples.append((time.perf_counter() - start) / CALLS * 1e6)
    return statistics.median(samples)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    json_option(parser, "auth_bench")
    args = parser.parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memsite.settings")
    os.environ.setdefault("DEBUG", "0")
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from memory_app.tenancy import services as tenancy
    from memory_app.tenancy.auth import find_active_key, key_digest
    from memory_app.tenancy.models import ApiKey

    call_command("migrate", verbosity=0)
    team = tenancy.team_get_or_create(name="auth-bench")
    api_key, raw = tenancy.api_key_create(team=team, name="auth-bench")
    try:
        digest = per_call_us(lambda: key_digest(raw))
        full = per_call_us(lambda: find_active_key(raw))
        floor = per_call_us(lambda: ApiKey.objects.filter(pk=api_key.pk).first())
    finally:
        api_key.delete()
    passed = full < 1000
    print(f"database: {connection.vendor}; median of {RUNS} runs x {CALLS} calls")
    print(f"keyed digest (HMAC-SHA256):       {digest:8.1f} us")
    print(f"find_active_key (lookup + digest): {full:8.1f} us  ({full / floor:.2f}x a bare pk read)")
    print(f"floor: bare pk read of ApiKey:     {floor:8.1f} us")
    print(f"target: well under 1000 us per request -> {'PASS' if passed else 'FAIL'}")
    write_figures(
        args.json,
        "auth_bench",
        {
            "database": connection.vendor,
            "runs": RUNS,
            "calls": CALLS,
            "keyed_digest_us": digest,
            "find_active_key_us": full,
            "bare_pk_read_us": floor,
            "find_active_key_over_floor": full / floor,
            "target_us": 1000,
            "passed": passed,
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
