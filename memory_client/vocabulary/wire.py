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

    context_id: str  # names this answer for GET /contexts/{context_id}/ (the replay)
    messages: list[LLMMessage]
    token_count: int
    recall: NotRequired[ContextRecall]  # present when recall put memories in the context


# --- the replay of a served context (GET /contexts/{context_id}/) -----------------------------


class ContextParams(TypedDict):
    """What the context read asked for; None where the request left the default."""

    last: int | None
    max_tokens: int | None
    recall: str | None
    recall_k: int | None
    recall_kinds: list[str] | None


class ServedPartInfo(TypedDict):
    """Where one served message comes from, in the order of `messages`."""

    kind: str  # system | recall | instruction | summary | message | borrowed
    seq: int | None  # the stored message it is (None for the system prompt, recall and summaries)
    token_count: int
    truncated: bool  # a tool output shortened by tool truncation


class ReplaySummary(TypedDict):
    run_id: str  # the compaction whose summary the context started from
    covered_to_seq: int | None
    messages: list[LLMMessage]  # the summary (and the instruction it keeps) as served


class ReplayedMemory(RecalledMemory):
    text: str  # the memory's text when it was recalled (its first 4000 characters)


class ReplayRecall(TypedDict):
    query: str
    automatic: bool
    token_count: int
    memories: list[ReplayedMemory]


class ContextBreakdownBody(TypedDict):
    system: int
    summary: int
    recall: int
    window: int
    priming: int


class ContextRecordBody(TypedDict):
    """What a context record keeps of one served context, compressed (the rest is on its ledger row)."""

    params: ContextParams
    messages: list[LLMMessage]
    parts: list[ServedPartInfo]
    summary: NotRequired[dict[str, Any] | None]  # {run_id, covered_to_seq}: messages are in `messages`
    recall: ReplayRecall | None


class ContextReplay(TypedDict):
    """GET /contexts/{context_id}/: one served context exactly as it was served."""

    context_id: str
    session_id: str
    served_at: str  # ISO 8601
    agent: str
    params: ContextParams
    messages: list[LLMMessage]  # byte for byte the `messages` of the answer it replays
    parts: list[ServedPartInfo]
    token_count: int
    raw_tokens: int  # the system prompt and every stored message when it was served
    breakdown: ContextBreakdownBody | None
    summary: ReplaySummary | None
    recall: ReplayRecall | None
    previous_context_id: str | None  # the session's served contexts before and after this one
    next_context_id: str | None


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
