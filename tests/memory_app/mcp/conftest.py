"""The MCP server under gunicorn (as production runs it), and the official MCP SDK client for it."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult

from tests.worker_process import process_env, start_gunicorn, stop

T = TypeVar("T")
# "auto" probes server/discover and settles on the current revision (2026-07-28); "legacy" does the
# initialize handshake (2025-11-25).
MODES = ("auto", "legacy")


@dataclass
class Server:
    process: subprocess.Popen[str]
    url: str

    @property
    def mcp_url(self) -> str:
        return f"{self.url}/mcp/"


@pytest.fixture(scope="module")
def gunicorn(django_db_setup: None, django_db_blocker: Any) -> Iterator[Server]:
    """One gunicorn (2 workers) for the module, on the test database; each test brings its teams."""
    with django_db_blocker.unblock():
        process, url = start_gunicorn(process_env(), workers=2)
    yield Server(process, url)
    stop(process)


@asynccontextmanager
async def connect(url: str, key: str | None, *, mode: str = "auto") -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode) as client,
    ):
        yield client


def run(make: Callable[[], Awaitable[T]]) -> T:
    return asyncio.run(make())  # type: ignore[arg-type]


def payload(result: CallToolResult) -> dict[str, Any]:
    """A tool result's structured content, checked against its text (what a model reads)."""
    assert result.structured_content is not None
    return result.structured_content


async def call(url: str, key: str, tool: str, arguments: dict[str, Any], *, mode: str = "auto") -> CallToolResult:
    async with connect(url, key, mode=mode) as client:
        return await client.call_tool(tool, arguments)


def text_json(result: CallToolResult) -> Any:
    return json.loads(result.content[0].text)  # type: ignore[union-attr]


def leaf_error(error: BaseException) -> BaseException:
    """The error an SDK call raised, out of the task groups its transports wrap it in."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return error
