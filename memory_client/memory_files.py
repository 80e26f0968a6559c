"""Memory files: the team's tree of text files under /memories, for file-style memory tools.

from memory_client import MemoryFiles
files = MemoryFiles(agent="coder")            # MEMSITE_URL / MEMSITE_API_KEY; agent=None: shared files
files.create("/memories/notes.md", "# Notes\n")
print(files.view("/memories"))

Each command answers with the text the Anthropic memory tool returns to the model; a refused one
raises ApiError (MemoryFileError for a 400/409/413, NotFoundError for a 404) whose `detail` is that
tool's wording of the refusal.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx

from memory_client.errors import ApiError, NotFoundError
from memory_client.transport import DEFAULT_RETRIES, DEFAULT_TIMEOUT, HttpApi

COMMAND_PATH = "memory-files/command/"


class MemoryFileError(ApiError):
    """A command the server refused: a path the rules refuse, an old_str not found or not unique, a
    create over a file (409), a file past the size limits (413). `fields` names the parameter."""


def _refused(exc: ApiError) -> ApiError:
    if isinstance(exc, NotFoundError) or exc.status_code not in (400, 409, 413):
        return exc
    return MemoryFileError(exc.detail, status_code=exc.status_code, error=exc.error, fields=exc.fields)


class MemoryFiles:
    """One owner's memory files: an agent's (`agent="coder"`) or the team's shared ones (None)."""

    def __init__(
        self,
        agent: str | None = None,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float | httpx.Timeout = DEFAULT_TIMEOUT,
        max_retries: int = DEFAULT_RETRIES,
        transport: httpx.BaseTransport | None = None,
        api: HttpApi | None = None,
    ) -> None:
        self.agent = agent
        self._owns_api = api is None
        self._api = api or HttpApi(
            base_url=base_url, api_key=api_key, timeout=timeout, max_retries=max_retries, transport=transport
        )

    def close(self) -> None:
        if self._owns_api:
            self._api.close()

    def __enter__(self) -> MemoryFiles:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _owner(self) -> dict[str, str]:
        return {} if self.agent is None else {"agent": self.agent}

    def command(self, command: str, **parameters: Any) -> dict[str, Any]:
        """Run one memory-tool command with its parameters; the answer {command, path, output, version}."""
        body = {"command": command, **{k: v for k, v in parameters.items() if v is not None}, **self._owner()}
        try:
            # Only a view may be sent again after a lost answer: the others change the file.
            response = self._api.request("POST", COMMAND_PATH, json_body=body, idempotent=command == "view")
        except ApiError as exc:
            raise _refused(exc) from exc
        answer: dict[str, Any] = response.json()
        return answer

    def view(self, path: str = "/memories", view_range: Sequence[int] | None = None) -> str:
        return self.command("view", path=path, view_range=list(view_range) if view_range else None)["output"]

    def create(self, path: str, file_text: str) -> str:
        return self.command("create", path=path, file_text=file_text)["output"]

    def str_replace(self, path: str, old_str: str, new_str: str) -> str:
        return self.command("str_replace", path=path, old_str=old_str, new_str=new_str)["output"]

    def insert(self, path: str, insert_line: int, insert_text: str) -> str:
        return self.command("insert", path=path, insert_line=insert_line, insert_text=insert_text)["output"]

    def delete(self, path: str) -> str:
        return self.command("delete", path=path)["output"]

    def rename(self, old_path: str, new_path: str) -> str:
        return self.command("rename", old_path=old_path, new_path=new_path)["output"]

    def list_files(self, prefix: str = "/memories") -> list[dict[str, Any]]:
        """This owner's files under `prefix`: path, agent, size, version, updated_at, updated_by."""
        results: list[dict[str, Any]] = self._api.get("memory-files/", prefix=prefix, agent=self.agent or "")["results"]
        return results

    def versions(self, path: str) -> list[dict[str, Any]]:
        """A file's history, newest first: version, action, path, author, created_at, diff."""
        query = {"path": path, "agent": self.agent or ""}
        response = self._api.request("GET", "memory-files/versions/", params=query, idempotent=True)
        results: list[dict[str, Any]] = response.json()["results"]
        return results

    def revert(self, path: str, version: int) -> dict[str, Any]:
        """Bring back the text of `version` as a new version (a deleted file comes back)."""
        body = {"path": path, "version": version, **self._owner()}
        try:
            response = self._api.request("POST", "memory-files/revert/", json_body=body)
        except ApiError as exc:
            raise _refused(exc) from exc
        file: dict[str, Any] = response.json()
        return file
