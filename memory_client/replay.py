"""Served contexts named and replayed: what exactly the model saw.

Every context read answers with a `context_id`. `ServedMessages` is the list of messages the
client returns, as before, carrying that id; `replay_context` asks the server for that context
exactly as it was served (GET /contexts/{context_id}/), whatever happened to the session since.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any, cast

from memory_client.errors import NotFoundError
from memory_client.transport import HttpApi
from memory_client.vocabulary.wire import ContextReplay

# The server writes served contexts in batches (about a second apart): a replay asked for within
# that second answers 404 `not_recorded_yet` with Retry-After. Waited for at most this long.
NOT_RECORDED_WAIT_SECONDS = 10.0
NOT_RECORDED_YET = "not_recorded_yet"
# Retry-After says a whole second; the batch is usually written sooner.
NOT_RECORDED_POLL_SECONDS = 0.25


class ServedMessages(list[dict[str, Any]]):
    """The messages of a served context (a plain list of OpenAI messages) and its `context_id`."""

    def __init__(self, messages: Iterable[dict[str, Any]], context_id: str | None) -> None:
        super().__init__(messages)
        self.context_id = context_id


def served_messages(answer: dict[str, Any]) -> ServedMessages:
    """A GET .../context/ answer's messages, with its id."""
    return ServedMessages(answer["messages"], answer.get("context_id"))


def replay_context(api: HttpApi, context_id: str, *, wait: float = NOT_RECORDED_WAIT_SECONDS) -> ContextReplay:
    """A served context exactly as it was served; NotFoundError when it is unknown, another
    team's, or past the server's MEMSITE_CONTEXT_RECORD_DAYS. Asked for right after the read,
    it waits (up to `wait` seconds) for the server to write it."""
    deadline = time.monotonic() + wait
    while True:
        try:
            return cast(ContextReplay, api.get(f"contexts/{context_id}/"))
        except NotFoundError as exc:
            if exc.error != NOT_RECORDED_YET or time.monotonic() >= deadline:
                raise
        time.sleep(min(NOT_RECORDED_POLL_SECONDS, max(deadline - time.monotonic(), 0)))
