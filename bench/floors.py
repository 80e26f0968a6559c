"""Bench-only floor endpoints: the least a DRF endpoint can do for one insert or one window read.

Mounted only by `bench/urls.py` (MEMSITE_BENCH_FLOORS=1), served by the same gunicorn as the
API, so the ratios in `bench/api_bench.py` measure what the product adds on top of DRF's
request cycle, the API-key authentication every call pays, and one SQL statement.
The tables are created by the bench with raw SQL: no model, no migration, nothing in the product.
"""

from __future__ import annotations

import json

from django.db import connection
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from bench.floor_tables import READ_GROUP, READ_SQL, WINDOW, WRITE_SQL


class InsertFloorView(APIView):
    """POST a message body; insert it as one row (autocommit); answer 201 with the row id."""

    def post(self, request: Request) -> Response:
        data = request.data
        with connection.cursor() as cursor:
            cursor.execute(WRITE_SQL, [data.get("role"), json.dumps(data.get("content"))])
            (row_id,) = cursor.fetchone()
        return Response({"id": row_id}, status=status.HTTP_201_CREATED)


class ReadFloorView(APIView):
    """GET the newest WINDOW rows of the seeded group by its (grp, seq) key, oldest first."""

    def get(self, request: Request) -> Response:
        with connection.cursor() as cursor:
            cursor.execute(READ_SQL, [READ_GROUP, WINDOW])
            rows = cursor.fetchall()
        # psycopg decodes `json` columns (as it does the messages' content for the API).
        messages = [{"role": role, "content": content} for role, content in reversed(rows)]
        return Response({"messages": messages})
