"""The JSON shapes the server sends and the client reads, defined once: stdlib only.

Each is a TypedDict of the body as it travels (ids and times as JSON has them: strings and
numbers). The server builds them; the client, the MCP proxy and the tests read them.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict, final

from memory_client.vocabulary.messages import LLMMessage


class ErrorBody(TypedDict):
    """Every API error: a code, a sentence for a person, and the problems by field path.

    `fields` maps a dotted/indexed path ("messages[0].role") to its problems; {} when the
    error is about no field. MCP tool errors carry the same body.
    """

    error: str
    detail: str
    fields: dict[str, list[str]]


class EventPayload(TypedDict):
    """A memory event as the events list, the live stream and webhooks send it."""

    id: int
    session_id: str | None
    kind: str  # compaction_started, facts_extracted, session_reset, ...
    data: dict[str, Any]  # the kind's own figures (run_id, pre_tokens, fact_id, ...)
    created_at: str  # ISO 8601 in UTC, with a Z


class RecalledMemory(TypedDict):
    """One memory recall put in a served context, as the answer and the usage ledger record it."""

    kind: str  # message, summary, fact, record, experience, shared_memory, attachment
    id: str  # the source's id
    item_id: int  # the search item (one piece of the source)
    session: str | None
    seq: int | None
    score: float


class ContextRecall(TypedDict):
    query: str
    automatic: bool  # from the session's automatic recall (its latest user message)
    memories: list[RecalledMemory]
    token_count: int


class ContextAnswer(TypedDict):
    """GET .../context/: the messages to send to an LLM and what they cost."""

    messages: list[LLMMessage]
    token_count: int
    recall: NotRequired[ContextRecall]  # present when recall put memories in the context


# --- MCP: JSON-RPC 2.0 answers ----------------------------------------------------------------

RequestId = str | int | None  # None answers a message whose id could not be read


class RpcErrorObject(TypedDict):
    code: int
    message: str
    data: NotRequired[Any]


# Final, so that `"error" in answer` tells a type checker which of the two an answer is.
@final
class RpcSuccess(TypedDict):
    jsonrpc: Literal["2.0"]
    id: RequestId
    result: dict[str, Any]


@final
class RpcFailure(TypedDict):
    jsonrpc: Literal["2.0"]
    id: RequestId
    error: RpcErrorObject


RpcAnswer = RpcSuccess | RpcFailure
