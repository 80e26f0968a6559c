"""The OpenAPI schema is what clients and external checks code against: it changes only on purpose.

`api_schema.<database>.json` is the schema as served on that database (integer bounds follow the
database's column ranges: 32-bit on PostgreSQL, 64-bit on SQLite); a difference that is not a
reordering fails here. After a deliberate API change, write the new copy with
`python -m tests.memsite.test_api_schema_snapshot` on each database (DATABASE_URL set for
PostgreSQL) and review its diff like code.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.test import Client


def snapshot() -> Path:
    return Path(__file__).with_name(f"api_schema.{connection.vendor}.json")


def served_schema() -> dict[str, Any]:
    return Client().get("/api/schema/?format=json").json()


def _differences(stored: Any, served: Any, path: str = "") -> list[str]:
    """Where two JSON documents differ, key order aside (lists keep their order)."""
    if isinstance(stored, dict) and isinstance(served, dict):
        found = [f"{path}/{key}: only in the snapshot" for key in stored.keys() - served.keys()]
        found += [f"{path}/{key}: only in the served schema" for key in served.keys() - stored.keys()]
        for key in stored.keys() & served.keys():
            found += _differences(stored[key], served[key], f"{path}/{key}")
        return found
    if isinstance(stored, list) and isinstance(served, list) and len(stored) == len(served):
        return [
            found
            for index, pair in enumerate(zip(stored, served, strict=True))
            for found in _differences(*pair, f"{path}[{index}]")
        ]
    if stored != served:
        return [f"{path}: {json.dumps(stored)[:120]} != {json.dumps(served)[:120]}"]
    return []


@pytest.mark.django_db
def test_the_served_schema_matches_the_stored_copy_up_to_order():
    differences = _differences(json.loads(snapshot().read_text()), served_schema())
    assert differences == [], "\n".join(sorted(differences)[:40])


if __name__ == "__main__":  # rewrite the stored copy
    import os

    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memsite.settings")
    django.setup()
    snapshot().write_text(json.dumps(served_schema(), indent=1, sort_keys=True, ensure_ascii=False) + "\n")
