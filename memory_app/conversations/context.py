"""The context an agent sends to its LLM, decided in one place.

`served_context` is the only function that decides what a session's context is and what it
costs: the `/context/` answer, the dashboard's context panel and the usage ledger all read
its parts and its token count. The figure a compaction's threshold is compared with,
`Session.active_tokens`, is the cached size of the same active context (system prompt +
summary, with the original instruction it keeps, + every message after it): appends add to
it and `compaction.services.active_tokens` recounts it.

Three figures, each named on every page that shows it:
- raw history: every stored message (what compaction never deletes);
- active context: system prompt + latest summary + every message after it;
- served window: what a read returns, after the session's processors (tool truncation and
  backward packing over the threshold, the sliding window, or a caller's `last` / `max_tokens`).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from django.conf import settings
from django.db import connection

from memory_app.compaction import config as memory_config
from memory_app.compaction import pipeline
from memory_app.compaction.models import CompactionRun
from memory_app.compaction.selectors import latest_done_run
from memory_app.conversations import counting, tokens
from memory_app.conversations.models import MemoryType, Message, Session
from memory_app.conversations.selectors import CONTEXT_FIELDS, column, concrete_field, select_rows
from memory_app.rounds.models import Round
from memory_client.vocabulary.messages import LLMMessage, to_openai_message
from memsite.errors import InvalidInput

# How many message rows a read of a long context looks at per round trip, newest first.
SCAN_CHUNK = 512
# How far before its N messages `last=N` looks for the tool call that a result answers.
LAST_REACH = 64
# Reads go to the newest row there is, not to the session's counter: rows written around the
# API (old imports, repairs by hand) are served too.
NEWEST = 2**62


class InjectedMemory(Protocol):
    """Memories recalled for a read (memory_app.search.recall.Recall), served as one message."""

    @property
    def message(self) -> LLMMessage: ...

    @property
    def token_count(self) -> int: ...

    def without_window(self, session_id: Any, seqs: Collection[int]) -> InjectedMemory: ...

    def fewer(self) -> InjectedMemory | None: ...


@dataclass(frozen=True)
class ContextPart:
    """One message of a served context, where it comes from and what it costs."""

    kind: str  # "system" | "recall" | "instruction" | "summary" | "message" | "borrowed"
    message: LLMMessage
    token_count: int
    seq: int | None = None  # the raw message it is (None for the system prompt and summaries)
    truncated: bool = False  # a tool output shortened by tool truncation


# Which part of the breakdown each kind of ContextPart counts toward.
BREAKDOWN_OF_KIND = {
    "system": "system",
    "instruction": "summary",  # kept verbatim in front of the summary, as part of it
    "summary": "summary",
    "recall": "recall",
    "message": "window",
    "borrowed": "window",  # the latest user message, served when packing left none
}


@dataclass(frozen=True)
class ContextBreakdown:
    """A served context's tokens by part; the parts add up to its `token_count`."""

    system: int = 0
    summary: int = 0
    recall: int = 0
    window: int = 0
    priming: int = tokens.REPLY_PRIMING_TOKENS

    @property
    def total(self) -> int:
        return self.system + self.summary + self.recall + self.window + self.priming


@dataclass(frozen=True)
class ServedContext:
    parts: list[ContextPart]
    stages: list[pipeline.Stage] = field(default_factory=list)  # processors applied on this read
    run: CompactionRun | None = None  # the compaction whose summary it starts from
    active_tokens: int = 0  # the active context this window was served from
    recall: InjectedMemory | None = None  # the memories recall put in it, if asked for
    # Tokens of stored messages the window kept out (the default window, `last`, `max_tokens`):
    # what the usage ledger names apart from what compaction saved.
    window_left_out: int = 0

    @property
    def messages(self) -> list[LLMMessage]:
        return [part.message for part in self.parts]

    @property
    def token_count(self) -> int:
        """What the request costs: its parts plus the reply priming every request pays."""
        return tokens.count_request([part.token_count for part in self.parts])

    @property
    def breakdown(self) -> ContextBreakdown:
        """`token_count` by part: system prompt, summary, recalled memories, window, priming."""
        sums = dict.fromkeys(("system", "summary", "recall", "window"), 0)
        for part in self.parts:
            sums[BREAKDOWN_OF_KIND[part.kind]] += part.token_count
        return ContextBreakdown(**sums, priming=self.token_count - sum(sums.values()))


# --- reading message rows ----------------------------------------------------------------------


def _no_failed_rounds(failure_rounds: bool) -> str:
    """The condition leaving the posts of failed rounds out of a read of message rows (none with
    `failure_rounds`): as the rounds model serves a role, a failed round is no part of what an
    agent is served unless it asks for failure rounds."""
    if failure_rounds:
        return ""
    quote = connection.ops.quote_name
    messages, rounds = quote(Message._meta.db_table), quote(Round._meta.db_table)
    round_id = quote(column(concrete_field(Message, "round")))
    pk = quote(column(concrete_field(Round, "id")))
    return (
        f" AND NOT EXISTS (SELECT 1 FROM {rounds} WHERE {rounds}.{pk} = {messages}.{round_id}"  # noqa: S608
        f" AND {rounds}.{quote('state')} = '{Round.State.FAILED.value}')"
    )


@functools.cache
def _rows_sql(direction: str, failure_rounds: bool) -> str:
    quote = connection.ops.quote_name
    columns = ", ".join(quote(column(concrete_field(Message, name))) for name in CONTEXT_FIELDS)
    return (
        f"SELECT {columns} FROM {quote(Message._meta.db_table)} "  # noqa: S608
        f"WHERE session_id = %s AND seq > %s AND seq <= %s{_no_failed_rounds(failure_rounds)} "
        f"ORDER BY seq {direction} LIMIT %s"
    )


def _session_pk(session: Session) -> Any:
    return Session._meta.pk.get_db_prep_value(session.pk, connection)


def _rows(
    session: Session,
    *,
    after: int,
    through: int,
    limit: int,
    newest_first: bool = False,
    failure_rounds: bool = False,
) -> list[dict]:
    """Message rows with after < seq <= through, oldest first (the newest `limit` when newest_first);
    posts of failed rounds only with `failure_rounds`."""
    fields = [concrete_field(Message, name) for name in CONTEXT_FIELDS]
    sql = _rows_sql("DESC" if newest_first else "ASC", failure_rounds)
    found = select_rows(sql, [_session_pk(session), after, through, limit], fields)
    rows = [dict(zip(CONTEXT_FIELDS, row, strict=True)) for row in found]
    return rows[::-1] if newest_first else rows


@functools.cache
def _meta_sql(failure_rounds: bool) -> str:
    """Everything the processors need of a message row, none of its content but two flags."""
    quote = connection.ops.quote_name
    table = quote(Message._meta.db_table)
    if connection.vendor == "postgresql":
        is_text = "json_typeof(content) = 'string'"
        text = "(content #>> '{}')"
        starts, holds = "LIKE 'Tool %%'", "LIKE '%%returned:%%'"
    else:
        is_text = "json_type(content) = 'text'"
        text = "json_extract(content, '$')"
        # SQLite's LIKE ignores case; GLOB matches case as row_item's check does.
        starts, holds = "GLOB 'Tool *'", "GLOB '*returned:*'"
    payload = f"(role = 'user' AND {is_text} AND {text} {starts} AND {text} {holds})"
    return (
        f"SELECT seq, role, token_count, tool_call_id, name, tool_calls, ({is_text}) AS is_text, {payload} "  # noqa: S608
        f"FROM {table} WHERE session_id = %s AND seq > %s AND seq <= %s{_no_failed_rounds(failure_rounds)} "
        "ORDER BY seq DESC LIMIT %s"
    )


def tool_call_ids(raw: Any) -> tuple[str, ...]:
    """The ids of a message's tool calls, from the column as stored (JSON text on some reads)."""
    calls = json.loads(raw) if isinstance(raw, str) else raw
    return tuple(str(call.get("id")) for call in calls or [] if isinstance(call, dict) and call.get("id"))


@functools.lru_cache(maxsize=4096)
def _short_text_tokens(text: str) -> int:
    """Tokens of a role, name, call id or marker: few distinct values, counted once each."""
    return tokens.count_text(text, settings.TOKEN_ENCODING)


def _truncated_cost(config: memory_config.ManagedMemoryConfig, role: str, name: str | None, call_id: str | None) -> int:
    """An upper bound of a tool output's count once shortened to `max_tool_message_tokens`."""
    truncation = config.active_context.tool_truncation
    total = tokens.TOKENS_PER_MESSAGE + _short_text_tokens(role) + truncation.max_tool_message_tokens
    total += _short_text_tokens(truncation.append_marker) + 3  # a cut may split a character
    if name:
        total += tokens.TOKENS_PER_NAME + _short_text_tokens(name)
    if call_id:
        total += _short_text_tokens(call_id)
    return total


def _meta_items(
    session: Session,
    config: memory_config.ManagedMemoryConfig,
    *,
    after: int,
    through: int,
    limit: int,
    failure_rounds: bool = False,
) -> list[pipeline.Item]:
    with connection.cursor() as cursor:
        cursor.execute(_meta_sql(failure_rounds), [_session_pk(session), after, through, limit])
        found = cursor.fetchall()
    max_tokens = config.active_context.tool_truncation.max_tool_message_tokens
    items = []
    for seq, role, count, call_id, name, calls, is_text, payload in reversed(found):
        tool_output = role == Message.Role.TOOL and bool(is_text)
        payload_user = bool(payload)
        shortened = (
            _truncated_cost(config, role, name, call_id)
            if (tool_output or payload_user) and count > max_tokens
            else None
        )
        items.append(
            pipeline.Item(
                role=role,
                tokens=count,
                seq=seq,
                call_ids=tool_call_ids(calls) if calls else (),
                tool_call_id=call_id,
                tool_output=tool_output,
                tool_payload_user=payload_user,
                truncated_tokens=shortened,
            )
        )
    return items


def row_item(row: dict[str, Any], config: memory_config.ManagedMemoryConfig) -> pipeline.Item:
    """A full message row as the processors see it (what `_meta_items` reads without content)."""
    content = row.get("content")
    tool_output = row["role"] == Message.Role.TOOL and isinstance(content, str)
    payload_user = (
        row["role"] == Message.Role.USER
        and isinstance(content, str)
        and content.startswith("Tool ")
        and "returned:" in content
    )
    max_tokens = config.active_context.tool_truncation.max_tool_message_tokens
    shortened = None
    if (tool_output or payload_user) and row["token_count"] > max_tokens:
        shortened = _truncated_cost(config, row["role"], row.get("name"), row.get("tool_call_id"))
    return pipeline.Item(
        role=row["role"],
        tokens=row["token_count"],
        seq=row.get("seq"),
        call_ids=tool_call_ids(row.get("tool_calls")),
        tool_call_id=row.get("tool_call_id"),
        tool_output=tool_output,
        tool_payload_user=payload_user,
        truncated_tokens=shortened,
    )


def _head_item(message: dict[str, Any]) -> pipeline.Item:
    return pipeline.Item(role=message["role"], tokens=int(message.get("token_count") or 0))


def _latest_user(session: Session, failure_rounds: bool) -> dict[str, Any] | None:
    users = Message.objects.filter(session=session, role=Message.Role.USER)
    if not failure_rounds:
        users = users.exclude(round__state=Round.State.FAILED)
    return users.order_by("-seq").values(*CONTEXT_FIELDS).first()


def shorten(row: dict[str, Any], config: memory_config.ManagedMemoryConfig) -> dict[str, Any]:
    """A tool output cut to `max_tool_message_tokens`, marked, and counted again."""
    truncation = config.active_context.tool_truncation
    shorter = dict(
        row, content=counting.truncate(row["content"], truncation.max_tool_message_tokens) + truncation.append_marker
    )
    shorter["token_count"] = counting.message_tokens(shorter)
    return shorter


# --- the managed context ---------------------------------------------------------------------


@dataclass
class _Body:
    """The context after the system prompt: head (summary) and tail rows, with their items."""

    head: list[dict[str, Any]]
    rows: dict[int, dict[str, Any]]  # seq -> full row, for the rows that may be served
    items: list[pipeline.Item]
    window: pipeline.Window
    borrowed: dict[str, Any] | None = None  # the latest user message, when packing left none


def _summary_head(run: CompactionRun | None) -> list[dict[str, Any]]:
    return [dict(message) for message in (run.summary or [])] if run is not None else []


def _managed_body(
    session: Session, config: memory_config.ManagedMemoryConfig, run: CompactionRun | None, failure_rounds: bool
) -> _Body:
    """Plan a managed session's window from cached counts, then read only the served rows."""
    head = _summary_head(run)
    after = run.covered_to_seq or 0 if run is not None else 0
    head_items = [_head_item(message) for message in head]
    fixed = session.system_prompt_tokens
    policy = config.active_context
    over = session.active_tokens > config.threshold_tokens
    if not policy.enabled or (policy.mode == "compaction" and not over):
        rows = _rows(session, after=after, through=NEWEST, limit=NEWEST, failure_rounds=failure_rounds)
        items = _whole_turns(head_items + [row_item(row, config) for row in rows])
        return _Body(head, {row["seq"]: row for row in rows}, items, pipeline.Window(keep=list(range(len(items)))))
    # Over the threshold the processors look at the newest whole turns up to twice the
    # threshold, and at least the rounds they protect. A memory is compacted as soon as an append
    # takes it over the threshold, so it holds the threshold plus what that append brought: this
    # is all of it in any real session. Older messages could never be served (packing keeps at
    # most the compaction target), so they are not read; the rows are planned from their cached
    # counts, newest first, a chunk at a time.
    limit = 2 * config.threshold_tokens
    graces = (policy.tool_truncation.grace_recent_messages, policy.backward_packing.grace_recent_messages)
    wanted_assistants = max(1, *graces)
    taken: list[pipeline.Item] = []  # newest first

    def enough() -> bool:
        # Never stop on a tool result: its call (the start of its turn) comes with it.
        return seen > limit and assistants >= wanted_assistants and taken[-1].role != Message.Role.TOOL

    through, seen, assistants, scanned_all = NEWEST, 0, 0, False
    chunk_size = _first_chunk(session, limit)
    while not scanned_all and not (taken and enough()):
        chunk = _meta_items(
            session, config, after=after, through=through, limit=chunk_size, failure_rounds=failure_rounds
        )
        for item in reversed(chunk):
            if taken and enough():
                break
            taken.append(item)
            seen += item.tokens
            assistants += item.role == Message.Role.ASSISTANT
        else:
            # The whole chunk was taken: a short one was the oldest there is.
            scanned_all = len(chunk) < chunk_size
        if chunk:
            through = (taken[-1].seq or 1) - 1
        chunk_size = SCAN_CHUNK
    tail_items = taken[::-1]
    if scanned_all and head_items:
        tail_items = head_items + tail_items
    # A turn still waiting for tool results is no part of a context: the processors (and the
    # grace rounds they protect) see only whole turns.
    items = _whole_turns(tail_items)
    window = pipeline.read_window(items, config, fixed_tokens=fixed)
    borrowed = None
    if not _has_user(items, pipeline.complete_turns(items, window.keep)):
        # Packing left no user message: the latest one is borrowed, inside the same budget.
        borrowed = _latest_user(session, failure_rounds)
        if borrowed is not None:
            window = pipeline.read_window(items, config, fixed_tokens=fixed + borrowed["token_count"])
    wanted = [seq for seq in (items[index].seq for index in window.keep) if seq is not None]
    served_rows: dict[int, dict[str, Any]] = {}
    if wanted:
        found = _rows(
            session,
            after=min(wanted) - 1,
            through=max(wanted),
            limit=max(wanted) - min(wanted) + 1,
            failure_rounds=failure_rounds,
        )
        served_rows = {row["seq"]: row for row in found}
    return _Body(head if scanned_all else [], served_rows, items, window, borrowed)


def _first_chunk(session: Session, tokens_wanted: int) -> int:
    """How many rows the first look back reads: the rows `tokens_wanted` takes at the session's
    average message size, with a margin (a second look covers a wrong guess)."""
    average = session.history_tokens / max(session.last_seq, 1)
    return min(max(int(tokens_wanted / max(average, 1) * 1.25) + 16, 32), 4 * SCAN_CHUNK)


def _whole_turns(items: list[pipeline.Item]) -> list[pipeline.Item]:
    return [items[index] for index in pipeline.complete_turns(items, list(range(len(items))))]


def _has_user(items: Sequence[pipeline.Item], keep: Sequence[int]) -> bool:
    return any(items[index].role == Message.Role.USER for index in keep)


def _plain_body(session: Session, limit: int, failure_rounds: bool) -> _Body:
    rows = _rows(session, after=0, through=NEWEST, limit=limit, newest_first=True, failure_rounds=failure_rounds)
    items = [
        pipeline.Item(
            role=row["role"],
            tokens=row["token_count"],
            seq=row["seq"],
            call_ids=tool_call_ids(row.get("tool_calls")),
            tool_call_id=row.get("tool_call_id"),
        )
        for row in rows
    ]
    keep = pipeline.complete_turns(items, list(range(len(items))))
    return _Body([], {row["seq"]: row for row in rows}, items, pipeline.Window(keep=keep))


def _last(items: Sequence[pipeline.Item], keep: list[int], last: int) -> list[int]:
    """The newest `last` messages of a window; a cut inside a tool turn moves back to the
    assistant message that made the calls (a result is never served without its call)."""
    if last >= len(keep):
        return keep
    start = len(keep) - last
    kept = [items[index] for index in keep]
    while start > 0 and kept[start].role == Message.Role.TOOL:
        unit = pipeline.unit_start(kept, start)
        if unit == start:
            break
        start = unit
    return pipeline.complete_turns(items, keep[start:])


def _fit(items: Sequence[pipeline.Item], keep: list[int], room: int) -> list[int]:
    """The newest whole turns of `keep` within `room` tokens (summary messages stay in front)."""
    fixed = [index for index in keep if items[index].seq is None]
    tail = [index for index in keep if items[index].seq is not None]
    room -= sum(items[index].tokens for index in fixed)
    # A caller's budget is a hard limit: no over-budget newest message either.
    packed = pipeline.pack(items, max(room, 0), grace_rounds=None, candidates=tail, newest_always=False)
    return fixed + packed


def _window_left_out(
    session: Session,
    body: _Body,
    planned: list[int],
    keep: list[int],
    parts: list[ContextPart],
    *,
    managed: bool,
) -> int:
    """Tokens of stored messages the window kept out of a context. Any other session's whole
    saving is its window (its history less the messages served). A managed session's active
    context is what compaction (summary, truncation, packing) left; the window is what `last`
    and `max_tokens` took off that, counted as the processors count it."""
    if not managed:
        served = sum(part.token_count for part in parts if part.seq is not None)
        return max(session.history_tokens - served, 0)
    truncated = body.window.truncate
    kept = set(keep)
    return sum(pipeline.cost(body.items[index], index in truncated) for index in planned if index not in kept)


def served_context(
    *,
    session: Session,
    last: int | None = None,
    max_tokens: int | None = None,
    recall: InjectedMemory | None = None,
    include_failure_rounds: bool = False,
) -> ServedContext:
    """THE context of a session: what `/context/` returns, the page shows and the ledger counts.

    A managed session gives its system prompt, its latest summary (with the original
    instruction it keeps) and the messages after it, through its processors when over the
    threshold (see memory_app.compaction.pipeline). Any other session gives its newest
    MEMSITE_CONTEXT_WINDOW messages. `last` keeps the newest N messages of that; `max_tokens`
    packs it newest-first into a caller's budget and fails when even the system prompt,
    the summary and one user message do not fit. `recall` is served as one message after the
    system prompt, inside the budget (the window shrinks to make room; recalled messages the
    window serves anyway are left out of it). The posts of a failed round are left out, as the
    rounds model leaves a failed round out of what a role is served, unless `include_failure_rounds`.
    """
    managed = session.memory_type == MemoryType.MANAGED_CONVERSATION
    config = memory_config.stored_config(session.memory_config) if managed else None
    run: CompactionRun | None = None
    if config is not None and config.active_context.enabled and config.active_context.mode == "compaction":
        run = latest_done_run(session.pk)
    if config is not None:
        body = _managed_body(session, config, run, include_failure_rounds)
    else:
        # `last` may reach back past its N messages to the tool call a result answers.
        window = last + LAST_REACH if last else settings.DEFAULT_CONTEXT_WINDOW
        body = _plain_body(session, window, include_failure_rounds)
    # A call whose results are not all stored yet is a turn in progress: no LLM accepts it.
    items, keep = body.items, pipeline.complete_turns(body.items, body.window.keep)
    planned = keep
    if last is not None:
        keep = _last(items, keep, last)
    fixed = session.system_prompt_tokens + tokens.REPLY_PRIMING_TOKENS
    if recall is not None and max_tokens is not None:
        # The memories take what room the system prompt leaves; the fewest that fit.
        while recall is not None and fixed + recall.token_count > max_tokens:
            recall = recall.fewer()
    fixed += recall.token_count if recall is not None else 0
    borrowed: dict[str, Any] | None = None
    if max_tokens is not None:
        keep = _fit(items, keep, max_tokens - fixed)
    if last is None and not _has_user(items, keep):
        borrowed = body.borrowed or _latest_user(session, include_failure_rounds)
        if borrowed is not None and max_tokens is not None:
            keep = _fit(items, keep, max_tokens - fixed - borrowed["token_count"])
    parts = _parts(session, body, keep, borrowed, config)
    left_out = _window_left_out(session, body, planned, keep, parts, managed=config is not None)
    if recall is not None:
        recall = recall.without_window(session.pk, {part.seq for part in parts if part.seq is not None})
        parts.insert(1 if session.system_prompt else 0, ContextPart("recall", recall.message, recall.token_count))
    served = ServedContext(
        parts=parts,
        stages=body.window.stages,
        run=run,
        active_tokens=session.active_tokens,
        recall=recall,
        window_left_out=left_out,
    )
    if max_tokens is not None and served.token_count > max_tokens:
        # The caller's budget is a hard limit (an answer over it fails at the model). Only the
        # fixed part can overflow it, so the count is the smallest budget that works.
        raise InvalidInput.for_field(
            "max_tokens",
            f"{max_tokens} is below the {served.token_count} tokens the system prompt, the summary and the "
            "latest user message need.",
        )
    return served


def _parts(
    session: Session,
    body: _Body,
    keep: Sequence[int],
    borrowed: dict[str, Any] | None,
    config: memory_config.ManagedMemoryConfig | None,
) -> list[ContextPart]:
    parts: list[ContextPart] = []
    if session.system_prompt:
        system: LLMMessage = {"role": "system", "content": session.system_prompt}
        parts.append(ContextPart("system", system, session.system_prompt_tokens))
    if borrowed is not None:
        parts.append(ContextPart("borrowed", to_openai_message(borrowed), borrowed["token_count"], borrowed["seq"]))
    head_positions = len([item for item in body.items if item.seq is None])
    for index in keep:
        item = body.items[index]
        if item.seq is None:
            message = body.head[index] if index < head_positions else {}
            kind = "instruction" if message.get("kind") == "instruction" else "summary"
            parts.append(ContextPart(kind, to_openai_message(message), item.tokens, message.get("seq")))
            continue
        row = body.rows[item.seq]
        shorter = shorten(row, config) if config is not None and index in body.window.truncate else None
        # Cutting an output just over the limit and adding the marker can make it longer: then
        # the output is served whole.
        if shorter is not None and shorter["token_count"] < row["token_count"]:
            parts.append(
                ContextPart("message", to_openai_message(shorter), shorter["token_count"], item.seq, truncated=True)
            )
        else:
            parts.append(ContextPart("message", to_openai_message(row), row["token_count"], item.seq))
    return parts


def context_build(
    *, session: Session, last: int | None = None, max_tokens: int | None = None, recall: InjectedMemory | None = None
) -> ServedContext:
    """The message array for an LLM (see served_context)."""
    return served_context(session=session, last=last, max_tokens=max_tokens, recall=recall)


# --- dashboard: the context panel ---------------------------------------------------------------


@dataclass(frozen=True)
class ActiveContext:
    head: list[ContextPart]  # the system prompt, a borrowed user message, the instruction and the summary
    messages: list[ContextPart]  # the newest `show_last` messages after them
    hidden: int  # older messages of the served window left out of `messages`
    token_count: int  # the served window's count, as `/context/` answers it
    active_tokens: int  # the active context it was served from
    run: CompactionRun | None  # the compaction whose summary it starts from
    stages: list[pipeline.Stage]  # processors applied on this read


def active_context_view(*, session: Session, show_last: int) -> ActiveContext:
    """served_context's parts for a person to read: exactly what an agent gets, labelled."""
    served = served_context(session=session)
    head = [part for part in served.parts if part.kind != "message"]
    body = [part for part in served.parts if part.kind == "message"]
    shown = body[-show_last:] if show_last > 0 else []
    return ActiveContext(
        head=head,
        messages=shown,
        hidden=len(body) - len(shown),
        token_count=served.token_count,
        active_tokens=served.active_tokens,
        run=served.run,
        stages=served.stages,
    )
