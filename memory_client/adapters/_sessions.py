"""What the conversation adapters share: a memsite session named by the framework's own id.

Frameworks name their conversations with ids of their own ("user-42", a thread id). memsite keeps
that name as the session's `external_id` (unique per team), so every process using the same name
reaches the same session, and the session is created by the first write that needs it.
"""

from __future__ import annotations

import threading
from typing import Any, Literal, overload

from memory_client.errors import ConflictError
from memory_client.transport import HttpApi, new_idempotency_key

PAGE = 1000  # the message list's largest page
MAX_LAST = 10000  # the largest `last` the message list and the context take
BATCH = 100  # messages per append request, well under the server's per-request limit


class NamedSession:
    """The memsite session whose external_id is `name`: looked up once, created on the first write."""

    def __init__(self, api: HttpApi, name: str, *, settings: dict[str, Any] | None = None) -> None:
        if not name:
            raise ValueError("A session needs a non-empty id.")
        self.api = api
        self.name = name
        self._settings = settings or {}
        self._id: str | None = None
        self._lock = threading.Lock()  # adapters call in from worker threads

    @overload
    def id(self, *, create: Literal[True]) -> str: ...

    @overload
    def id(self, *, create: bool) -> str | None: ...

    def id(self, *, create: bool) -> str | None:
        """The session's id; None when it does not exist yet and `create` is False (a read)."""
        with self._lock:
            if self._id is None:
                self._id = self._find() or (self._create() if create else None)
            return self._id

    def _find(self) -> str | None:
        found = self.api.get("sessions/", external_id=self.name, limit=1)["results"]
        return str(found[0]["id"]) if found else None

    def _create(self) -> str:
        body = {"external_id": self.name, **self._settings}
        try:
            return str(
                self.api.request("POST", "sessions/", json_body=body, idempotency_key=new_idempotency_key()).json()[
                    "id"
                ]
            )
        except ConflictError:
            # Another process created it between our lookup and our create: use theirs.
            found = self._find()
            if found is None:
                raise
            return found

    def path(self, session_id: str) -> str:
        return f"sessions/{session_id}/"

    def rows(self, session_id: str, *, last: int | None = None) -> list[dict[str, Any]]:
        """Stored messages in seq order: the newest `last`, or every one page by page."""
        path = self.path(session_id) + "messages/"
        if last is not None and last <= MAX_LAST:
            return list(self.api.get(path, last=last)["results"])
        rows: list[dict[str, Any]] = []
        after = None
        while True:
            page = self.api.get(path, after=after, limit=PAGE)
            rows.extend(page["results"])
            after = page["next_after"]
            if after is None:
                return rows[-last:] if last is not None else rows

    def append(self, messages: list[dict[str, Any]]) -> None:
        """Append messages in order, creating the session on first use.

        Up to BATCH messages go in one atomic request; its Idempotency-Key (and the messages'
        client-chosen ids) make a retry store them once.
        """
        if not messages:
            return
        session_id = self.id(create=True)
        for start in range(0, len(messages), BATCH):
            chunk = messages[start : start + BATCH]
            body = chunk[0] if len(chunk) == 1 else {"messages": chunk}
            self.api.request(
                "POST", self.path(session_id) + "messages/", json_body=body, idempotency_key=new_idempotency_key()
            )

    def reset(self) -> None:
        """Delete every message, keep the session (its external_id, prompt and settings)."""
        session_id = self.id(create=False)
        if session_id is not None:
            self.api.request("POST", self.path(session_id) + "reset/")
