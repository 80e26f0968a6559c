"""TaskWeaver's Memory (a session's conversation of rounds and posts) kept on a memsite server.

    memory = Memory(base_url=..., api_key=...)            # a new session (or session_id=...)
    round_ = memory.create_round("count the rows of data.csv")
    memory.add_post(round_.id, Post.create("count the rows", "Planner", "CodeInterpreter"))
    memory.set_round_state(round_.id, "finished")
    memory.get_role_rounds("CodeInterpreter")              # [Round(...)], each with only its posts
    memory.get_shared_memory_entries("plan")

Every write carries a client-chosen id (round id, post message_id, entry id), so the transport
retries them safely; the server answers a repeat with the stored object. Reads always go to
the server: other agents write the same session.
"""

from __future__ import annotations

import uuid
from typing import Any, Literal

import httpx
import yaml

from memory_client.conversation import Conversation, Post, Round, SharedMemoryEntry, new_id
from memory_client.memory import SessionBound, _as_uuid
from memory_client.transport import DEFAULT_RETRIES, DEFAULT_TIMEOUT, HttpApi, new_idempotency_key


class Memory(SessionBound):
    """A session's rounds, posts, attachments and shared memory over the REST API."""

    def __init__(
        self,
        session_id: str | None = None,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        system_prompt: str = "",
        external_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        timeout: float | httpx.Timeout = DEFAULT_TIMEOUT,
        max_retries: int = DEFAULT_RETRIES,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        canonical = None if session_id is None else _as_uuid(session_id)
        if session_id is not None and canonical is None:
            raise ValueError(f"session_id must be a UUID, got {session_id!r}")
        self._api = HttpApi(
            base_url=base_url, api_key=api_key, timeout=timeout, max_retries=max_retries, transport=transport
        )
        try:
            if canonical is None:
                body: dict[str, Any] = {"system_prompt": system_prompt}
                if external_id is not None:
                    body["external_id"] = external_id
                if metadata is not None:
                    body["metadata"] = metadata
                self.session_id: str = self._api.request(
                    "POST", "sessions/", json_body=body, idempotency_key=new_idempotency_key()
                ).json()["id"]
            else:
                self.session_id = self._api.get(f"sessions/{canonical}/")["id"]
        except BaseException:
            self._api.close()  # no connection pool left behind by a constructor that failed
            raise

    # --- rounds and posts ----------------------------------------------------------------

    def create_round(self, user_query: str, round_id: str | None = None) -> Round:
        body = {"user_query": user_query, "id": round_id or new_id("round")}
        answer = self._api.request("POST", self._path + "rounds/", json_body=body, idempotent=True).json()
        return Round.from_dict(answer)

    def add_post(self, round_id: str, post: Post, *, role: str | None = None) -> Post:
        """Add the post (its id and attachments kept) to the round; it becomes a session message."""
        body: dict[str, Any] = {**post.to_dict(), "message_id": str(uuid.uuid4())}
        if role is not None:
            body["role"] = role
        answer = self._api.request(
            "POST", f"{self._path}rounds/{round_id}/posts/", json_body=body, idempotent=True
        ).json()
        return Post.from_dict(answer)

    def set_round_state(self, round_id: str, state: Literal["created", "finished", "failed"]) -> Round:
        # Setting a state is idempotent: a repeat leaves the round as the first one did.
        answer = self._api.request(
            "PATCH", f"{self._path}rounds/{round_id}/", json_body={"state": state}, idempotent=True
        ).json()
        return Round.from_dict(answer)

    def _rounds(self, **params: Any) -> list[Round]:
        rounds: list[Round] = []
        after = None
        while True:
            page = self._api.get(self._path + "rounds/", after=after, limit=500, **params)
            rounds.extend(Round.from_dict(item) for item in page["results"])
            after = page["next_after"]
            if after is None:
                return rounds

    def get_rounds(self, include_failure_rounds: bool = True) -> list[Round]:
        return self._rounds(include_failure_rounds=_flag(include_failure_rounds))

    def get_role_rounds(self, role: str, include_failure_rounds: bool = False) -> list[Round]:
        """TaskWeaver's get_role_rounds: every round (failed ones only when asked), each holding only the
        posts `role` sent or received; a round without one has an empty post_list."""
        return self._rounds(role=role, include_failure_rounds=_flag(include_failure_rounds))

    # --- shared memory -------------------------------------------------------------------

    def add_shared_memory_entry(
        self, entry: SharedMemoryEntry, *, round_id: str | None = None, created_by: str | None = None
    ) -> SharedMemoryEntry:
        body: dict[str, Any] = entry.to_dict()
        if round_id is not None:
            body["round"] = round_id
        if created_by is not None:
            body["created_by"] = created_by
        answer = self._api.request("POST", self._path + "shared-memory/", json_body=body, idempotent=True).json()
        return SharedMemoryEntry.from_dict(answer)

    def get_shared_memory_entries(self, entry_type: str) -> list[SharedMemoryEntry]:
        """TaskWeaver's get_shared_memory_entries: conversation scope from all rounds, round scope from
        the current one; each role's latest entry."""
        return [
            SharedMemoryEntry.from_dict(item) for item in self._api.get(self._path + "shared-memory/", type=entry_type)
        ]

    # --- the whole conversation ----------------------------------------------------------

    def export_conversation(self, format: Literal["json", "yaml"] = "json") -> dict[str, Any] | str:
        """The server's export: a dict (json) or YAML text."""
        response = self._api.request("GET", self._path + "conversation/", params={"format": format}, idempotent=True)
        return response.json() if format == "json" else response.text

    def get_conversation(self) -> Conversation:
        return Conversation.from_dict(self._api.get(self._path + "conversation/", format="json"))

    def record_scratch(self, action: str, observation: Any = None, duration: float | None = None) -> None:
        """Scratch memory: a tool execution the turn's final answer will carry in meta.scratch.

        Not retried once sent: a repeat would record the execution twice."""
        body = {"action": action, "observation": observation, "duration": duration}
        self._api.request("POST", self._path + "scratch/", json_body=body)

    @classmethod
    def import_conversation(
        cls,
        conversation: Conversation | dict[str, Any] | str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        **kwargs: Any,
    ) -> tuple[Memory, list[str]]:
        """A new session holding the conversation (a Conversation, its dict, or YAML text).

        Returns the Memory and the server's warnings (removed attachment types dropped)."""
        if isinstance(conversation, Conversation):
            conversation = conversation.to_dict()
        elif isinstance(conversation, str):
            conversation = yaml.safe_load(conversation)  # plain data only; sent as JSON
        api = HttpApi(base_url=base_url, api_key=api_key)
        try:
            answer = api.request("POST", "sessions/conversation/import/", json_body=conversation).json()
        finally:
            api.close()
        return cls(answer["session_id"], base_url=base_url, api_key=api_key, **kwargs), answer["warnings"]


def _flag(value: bool) -> str:
    return "true" if value else "false"
