"""The limit floor: what this machine can do for one authenticated insert or window read.

A plain WSGI callable (no Django, no DRF, no ORM) served by the same gunicorn as the product
(`bench/wsgi.py` routes `/bench/limit/` here), doing what every agent call must do at the least:
find the key by its prefix and check its HMAC digest (the product's own rule and table), run
one SQL statement with psycopg, and answer JSON. `bench/api_bench.py` reports the product's
CPU per request as a multiple of this one's.

Reads `DATABASE_URL` and `API_KEY_HMAC_SECRET` from the environment, as the product does.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from collections.abc import Callable, Iterable
from typing import Any

import psycopg

from bench.floor_tables import READ_GROUP, READ_SQL, WINDOW, WRITE_SQL

PREFIX = "/bench/limit/"
KEY_PREFIX_LENGTH = len("msk_") + 8
_KEY_SQL = "SELECT digest FROM memory_app_apikey WHERE prefix = %s AND revoked_at IS NULL"
_connection: psycopg.Connection[Any] | None = None

StartResponse = Callable[[str, list[tuple[str, str]]], Any]


def _database() -> psycopg.Connection[Any]:
    """One autocommit connection per process, reopened when the server dropped it."""
    global _connection
    if _connection is None or _connection.closed:
        _connection = psycopg.connect(os.environ["DATABASE_URL"], autocommit=True)
    return _connection


def _key_is_valid(environ: dict[str, Any], conn: psycopg.Connection[Any]) -> bool:
    scheme, _, raw_key = environ.get("HTTP_AUTHORIZATION", "").partition(" ")
    if scheme != "Bearer" or len(raw_key) <= KEY_PREFIX_LENGTH:
        return False
    row = conn.execute(_KEY_SQL, [raw_key[:KEY_PREFIX_LENGTH]]).fetchone()
    secret = os.environ["API_KEY_HMAC_SECRET"].encode()
    digest = hmac.new(secret, raw_key.encode(), hashlib.sha256).hexdigest()
    return row is not None and hmac.compare_digest(row[0], digest)


def _answer(start_response: StartResponse, status: str, body: dict[str, Any]) -> Iterable[bytes]:
    payload = json.dumps(body).encode()
    start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(payload)))])
    return [payload]


def application(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
    conn = _database()
    if not _key_is_valid(environ, conn):
        return _answer(start_response, "401 Unauthorized", {"error": "not_authenticated"})
    action = environ["PATH_INFO"].removeprefix(PREFIX).strip("/")
    if action == "insert" and environ["REQUEST_METHOD"] == "POST":
        length = int(environ.get("CONTENT_LENGTH") or 0)
        data = json.loads(environ["wsgi.input"].read(length))
        if not isinstance(data, dict) or not isinstance(data.get("role"), str):
            return _answer(start_response, "400 Bad Request", {"error": "validation_error"})
        (row_id,) = conn.execute(WRITE_SQL, [data["role"], json.dumps(data.get("content"))]).fetchone()  # type: ignore[misc]
        return _answer(start_response, "201 Created", {"id": row_id})
    if action == "read" and environ["REQUEST_METHOD"] == "GET":
        rows = conn.execute(READ_SQL, [READ_GROUP, WINDOW]).fetchall()
        return _answer(start_response, "200 OK", {"messages": [{"role": r, "content": c} for r, c in reversed(rows)]})
    return _answer(start_response, "404 Not Found", {"error": "not_found"})
