"""The Anthropic SDK's memory tool, kept in memsite's memory files.

    import anthropic
    from memory_client.adapters.anthropic_memory import MemsiteMemoryTool

    memory = MemsiteMemoryTool(agent="researcher")  # MEMSITE_URL / MEMSITE_API_KEY; agent=None: shared
    runner = anthropic.Anthropic().beta.messages.tool_runner(
        model="claude-sonnet-5-5", max_tokens=1024, tools=[memory],
        messages=[{"role": "user", "content": "Remember that the deploy needs two approvals."}],
    )
    final = runner.until_done()

A subclass of the SDK's `BetaAbstractMemoryTool`: each of the six commands the model sends (view,
create, str_replace, insert, delete, rename) goes to `POST /api/v1/memory-files/command/` as it came,
and the model reads back the server's answer, in the wording of the SDK's own file-backed tool. A
command the server refuses (a path outside /memories, an old_str not found, a file that exists) is
a `ToolError` with the server's reason, which the tool runner hands the model as an error result.
Every change is versioned on the server, searchable, and shown on the dashboard.
"""

from __future__ import annotations

from typing import Any

import httpx
from anthropic.lib.tools import BetaAbstractMemoryTool, BetaFunctionToolResultType, ToolError
from anthropic.types.beta import (
    BetaCacheControlEphemeralParam,
    BetaMemoryTool20250818CreateCommand,
    BetaMemoryTool20250818DeleteCommand,
    BetaMemoryTool20250818InsertCommand,
    BetaMemoryTool20250818RenameCommand,
    BetaMemoryTool20250818StrReplaceCommand,
    BetaMemoryTool20250818ViewCommand,
)

from memory_client.errors import ApiError
from memory_client.memory_files import MemoryFiles
from memory_client.transport import DEFAULT_RETRIES, DEFAULT_TIMEOUT

Command = (
    BetaMemoryTool20250818ViewCommand
    | BetaMemoryTool20250818CreateCommand
    | BetaMemoryTool20250818StrReplaceCommand
    | BetaMemoryTool20250818InsertCommand
    | BetaMemoryTool20250818DeleteCommand
    | BetaMemoryTool20250818RenameCommand
)


class MemsiteMemoryTool(BetaAbstractMemoryTool):
    """The memory tool over one owner's memory files: an agent's (`agent`), or the team's shared ones."""

    def __init__(
        self,
        agent: str | None = None,
        *,
        files: MemoryFiles | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float | httpx.Timeout = DEFAULT_TIMEOUT,
        max_retries: int = DEFAULT_RETRIES,
        transport: httpx.BaseTransport | None = None,
        cache_control: BetaCacheControlEphemeralParam | None = None,
    ) -> None:
        super().__init__(cache_control=cache_control)
        self.files = files or MemoryFiles(
            agent, base_url=base_url, api_key=api_key, timeout=timeout, max_retries=max_retries, transport=transport
        )

    def close(self) -> None:
        self.files.close()

    def _send(self, command: Command) -> str:
        parameters: dict[str, Any] = command.model_dump(exclude_none=True)
        name = parameters.pop("command")
        try:
            answer = self.files.command(name, **parameters)
        except ApiError as exc:
            # The model reads the server's reason and can send a better command.
            raise ToolError(f"Error: {exc.detail}") from exc
        output: str = answer["output"]
        return output

    def view(self, command: BetaMemoryTool20250818ViewCommand) -> BetaFunctionToolResultType:
        return self._send(command)

    def create(self, command: BetaMemoryTool20250818CreateCommand) -> BetaFunctionToolResultType:
        return self._send(command)

    def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> BetaFunctionToolResultType:
        return self._send(command)

    def insert(self, command: BetaMemoryTool20250818InsertCommand) -> BetaFunctionToolResultType:
        return self._send(command)

    def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> BetaFunctionToolResultType:
        return self._send(command)

    def rename(self, command: BetaMemoryTool20250818RenameCommand) -> BetaFunctionToolResultType:
        return self._send(command)
