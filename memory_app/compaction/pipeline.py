"""Which processors of a managed context run, on what, with what effect. Pure: no Django import.

A managed context is the system prompt, the latest summary (with the original instruction it
keeps) and the messages after it. While it is within `threshold_tokens` it is served whole.
Over the threshold the session's processors run in `processor_order`, minus
`excluded_processors`, as the reference library runs them: each processor but the last runs
only when its estimated saving is at least `min_reduction_ratio` of the threshold; the last
always runs. Tool truncation and backward packing are cheap and deterministic, so they are
applied when the context is read; summarization calls an LLM, so it runs on a worker and is
only planned here.

The functions work on `Item`s (a message's role, cached token count and tool-call links,
never its content), so a session of any length is planned from the counts cached on its
rows and only the rows that are served are read in full.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from memory_client.vocabulary.config import ManagedMemoryConfig

TOOL_TRUNCATION = "tool_truncation"
SUMMARIZATION = "summarization"
BACKWARD_PACKING = "backward_packing"
SLIDING_WINDOW = "sliding_window"


@dataclass(frozen=True)
class Item:
    """One message of an active context as the processors see it."""

    role: str
    tokens: int
    seq: int | None = None  # the raw message's seq; None for the summary head
    call_ids: tuple[str, ...] = ()
    tool_call_id: str | None = None
    # A string tool output, or a user message carrying one ("Tool X returned: ..."):
    # what tool truncation may shorten.
    tool_output: bool = False
    tool_payload_user: bool = False
    truncated_tokens: int | None = None  # its cost once shortened (an upper bound)


@dataclass(frozen=True)
class Stage:
    """What one processor did to a context, and why."""

    processor: str
    ran: bool
    reason: str = ""
    estimated_savings: int | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"processor": self.processor, "ran": self.ran}
        if self.reason:
            data["reason"] = self.reason
        if self.estimated_savings is not None:
            data["estimated_savings"] = self.estimated_savings
        return data


@dataclass(frozen=True)
class Window:
    """The served part of a context: indexes into the planned items."""

    keep: list[int]
    truncate: frozenset[int] = frozenset()
    stages: list[Stage] = field(default_factory=list)


def cost(item: Item, truncated: bool) -> int:
    if truncated and item.truncated_tokens is not None:
        return min(item.tokens, item.truncated_tokens)
    return item.tokens


def chain(config: ManagedMemoryConfig) -> list[str]:
    """The processors that run, in order: `processor_order` minus `excluded_processors`."""
    policy = config.active_context
    seen: list[str] = []
    for name in policy.processor_order:
        if name not in policy.excluded_processors and name not in seen:
            seen.append(name)
    return seen


def summarization_usable(config: ManagedMemoryConfig) -> bool:
    """Whether this config ever asks an LLM for a summary."""
    policy = config.active_context
    return (
        policy.enabled
        and policy.mode == "compaction"
        and policy.summarization.enabled
        and SUMMARIZATION in chain(config)
    )


# --- protected tail and tool turns ----------------------------------------------------------


def protected_tail_start(roles: Sequence[str], grace_rounds: int) -> int:
    """Index where the protected tail starts (assistant-round semantics).

    `grace_rounds = n` protects from the n-th most recent assistant message onward (n <= 0
    counts as 1). With fewer assistant messages the oldest one starts the tail; with none the
    last message is protected (the model must see what it is answering).
    """
    wanted = max(grace_rounds, 1)
    oldest_seen: int | None = None
    seen = 0
    for index in range(len(roles) - 1, -1, -1):
        if roles[index] == "assistant":
            seen += 1
            oldest_seen = index
            if seen >= wanted:
                return index
    if oldest_seen is not None:
        return oldest_seen
    return max(len(roles) - 1, 0)


def unit_start(items: Sequence[Item], end: int) -> int:
    """Start of the unit that ends at index `end`: a tool result belongs with the assistant
    message that made its call (and the results and user payloads between them)."""
    if items[end].role != "tool":
        return end
    wanted = {items[end].tool_call_id}
    index = end - 1
    while index >= 0:
        item = items[index]
        if item.role == "tool":
            wanted.add(item.tool_call_id)
        elif item.call_ids and wanted & set(item.call_ids):
            return index
        elif item.role == "assistant":
            break
        index -= 1
    return end  # an orphan result: a unit of its own (dropped by complete_turns)


def complete_turns(items: Sequence[Item], keep: Sequence[int]) -> list[int]:
    """`keep` without tool results whose call is not kept and calls missing a result."""
    kept = [items[index] for index in keep]
    answered: dict[str, int] = {}
    for position, item in enumerate(kept):
        if item.role == "tool" and item.tool_call_id:
            answered.setdefault(item.tool_call_id, position)
    out: list[int] = []
    open_calls: set[str] = set()
    for position, (index, item) in enumerate(zip(keep, kept, strict=True)):
        if item.call_ids:
            if all(answered.get(call, -1) > position for call in item.call_ids):
                open_calls |= set(item.call_ids)
                out.append(index)
        elif item.role == "tool":
            if item.tool_call_id in open_calls:
                out.append(index)
        else:
            out.append(index)
    return out


# --- processors -------------------------------------------------------------------------------


def _gate(saving: int, config: ManagedMemoryConfig, is_last: bool) -> bool:
    if is_last:
        return True
    threshold = config.threshold_tokens
    ratio = saving / threshold if threshold > 0 else 0.0
    return ratio >= config.active_context.min_reduction_ratio


def truncation_candidates(items: Sequence[Item], config: ManagedMemoryConfig) -> list[int]:
    """Tool outputs above `max_tool_message_tokens`, outside the truncation grace rounds."""
    truncation = config.active_context.tool_truncation
    protected = protected_tail_start([item.role for item in items], truncation.grace_recent_messages)
    return [
        index
        for index, item in enumerate(items[:protected])
        if (item.tool_output or (item.tool_payload_user and truncation.include_tool_payload_user_messages))
        and item.tokens > truncation.max_tool_message_tokens
        and cost(item, True) < item.tokens
    ]


def tool_truncation(
    items: Sequence[Item], config: ManagedMemoryConfig, *, is_last: bool
) -> tuple[Stage, frozenset[int]]:
    if not config.active_context.tool_truncation.enabled:
        return Stage(TOOL_TRUNCATION, ran=False, reason="disabled"), frozenset()
    candidates = truncation_candidates(items, config)
    saving = sum(items[index].tokens - cost(items[index], True) for index in candidates)
    if not _gate(saving, config, is_last):
        return Stage(TOOL_TRUNCATION, False, "below min_reduction_ratio", saving), frozenset()
    return Stage(TOOL_TRUNCATION, True, estimated_savings=saving), frozenset(candidates)


def summarization_prefix_end(items: Sequence[Item], config: ManagedMemoryConfig, *, at_least_one: bool = False) -> int:
    """Where the protected tail of a summarization starts, moved to a turn boundary."""
    grace = config.active_context.summarization.grace_recent_messages
    if at_least_one:
        grace = max(grace, 1)
    split = protected_tail_start([item.role for item in items], grace)
    while split > 0 and items[split].role == "tool":
        split = unit_start(items, split)
        if items[split].role == "tool":  # an orphan result: keep it with the tail
            split -= 1
    return max(split, 0)


def summarization(
    items: Sequence[Item], config: ManagedMemoryConfig, truncated: frozenset[int], *, is_last: bool
) -> tuple[Stage, int]:
    """Whether a summary is worth an LLM call; returns (stage, prefix end)."""
    summarization_config = config.active_context.summarization
    if not summarization_config.enabled:
        return Stage(SUMMARIZATION, False, "disabled"), 0
    end = summarization_prefix_end(items, config)
    if end == 0 or all(item.seq is None for item in items[:end]):
        return Stage(SUMMARIZATION, False, "nothing to summarize: every message is in the protected tail"), 0
    prefix = sum(cost(items[index], index in truncated) for index in range(end))
    saving = max(0, prefix - min(summarization_config.output_max_tokens, prefix // 2))
    if not _gate(saving, config, is_last):
        return Stage(SUMMARIZATION, False, "below min_reduction_ratio", saving), 0
    return Stage(SUMMARIZATION, True, estimated_savings=saving), end


def pack(
    items: Sequence[Item],
    budget: int,
    *,
    grace_rounds: int | None,
    truncated: frozenset[int] = frozenset(),
    candidates: Sequence[int] | None = None,
    newest_always: bool = True,
) -> list[int]:
    """The newest whole units within `budget`, oldest first; the grace rounds always kept, and
    the summary in front (items without a seq) too.

    Unlike the reference library, which skips a unit that does not fit and keeps filling the
    budget with older ones, packing stops at the first unit that does not fit: the served
    window stays one contiguous stretch of the conversation, so no message is served without
    what led to it. And it never drops the summary to make room for raw messages: the summary
    is what stands for everything before them.
    """
    order = list(candidates) if candidates is not None else list(range(len(items)))
    if not order:
        return []
    sub = [items[index] for index in order]
    head_end = 0
    while head_end < len(sub) and sub[head_end].seq is None:
        head_end += 1
    protected = len(sub) if grace_rounds is None else protected_tail_start([i.role for i in sub], grace_rounds)
    while 0 < protected < len(sub) and sub[protected].role == "tool":
        start = unit_start(sub, protected)
        protected = start if start < protected else protected - 1
    protected = max(protected, head_end)
    kept = list(range(protected, len(sub)))
    used = sum(cost(sub[p], order[p] in truncated) for p in [*range(head_end), *kept])
    end = protected - 1
    while end >= head_end:
        start = unit_start(sub, end)
        unit = range(start, end + 1)
        unit_cost = sum(cost(sub[p], order[p] in truncated) for p in unit)
        if used + unit_cost > budget:
            if newest_always and not kept and grace_rounds is None and end == len(sub) - 1:
                kept = list(unit)  # the newest message alone is over budget: serve it anyway
            break
        kept[:0] = list(unit)
        used += unit_cost
        end = start - 1
    return [order[p] for p in complete_turns(sub, [*range(head_end), *kept])]


def backward_packing(
    items: Sequence[Item],
    config: ManagedMemoryConfig,
    truncated: frozenset[int],
    *,
    is_last: bool,
    budget: int,
) -> tuple[Stage, list[int] | None]:
    total = sum(cost(item, index in truncated) for index, item in enumerate(items))
    saving = max(0, total - config.compaction_target_tokens)
    if not _gate(saving, config, is_last):
        return Stage(BACKWARD_PACKING, False, "below min_reduction_ratio", saving), None
    grace = config.active_context.backward_packing.grace_recent_messages
    return Stage(BACKWARD_PACKING, True, estimated_savings=saving), pack(
        items, budget, grace_rounds=grace, truncated=truncated
    )


# --- the whole context -------------------------------------------------------------------------


def read_window(items: Sequence[Item], config: ManagedMemoryConfig, *, fixed_tokens: int) -> Window:
    """What a read of the active context serves, from the items after the system prompt.

    `fixed_tokens`: what the context holds besides `items` (the system prompt), counted
    against the same budgets.
    """
    policy = config.active_context
    everything = list(range(len(items)))
    if not policy.enabled:
        return Window(keep=everything)
    if policy.mode == SLIDING_WINDOW:
        budget = int(config.compaction_target_tokens * (1 - policy.sliding_window.headroom_percent))
        if not policy.sliding_window.enabled:
            return Window(keep=everything, stages=[Stage(SLIDING_WINDOW, False, "disabled")])
        keep = pack(items, max(budget - fixed_tokens, 0), grace_rounds=None)
        return Window(keep=keep, stages=[Stage(SLIDING_WINDOW, True)])
    total = fixed_tokens + sum(item.tokens for item in items)
    if total <= config.threshold_tokens:
        return Window(keep=everything)
    return run_chain(items, config, fixed_tokens=fixed_tokens, with_summary=False).window


@dataclass(frozen=True)
class ChainResult:
    window: Window
    summarize_through: int  # items[:summarize_through] go to the summarizer (0: no summary)
    truncated: frozenset[int] = frozenset()  # every item tool truncation shortened


def run_chain(
    items: Sequence[Item],
    config: ManagedMemoryConfig,
    *,
    fixed_tokens: int,
    with_summary: bool,
) -> ChainResult:
    """The processors of `chain(config)` over `items`, in order, each on what the ones before
    it left, as the reference library runs them: after packing, the kept items; after a summary
    (planned on a worker), the summary -- an assistant message of its estimated size -- and the
    items after it.

    `with_summary`: a worker plans a compaction (summarization may run); a read applies only
    the processors that need no LLM, and reports summarization as waiting for a worker.
    """
    names = chain(config)
    truncated: frozenset[int] = frozenset()
    keep: list[int] = list(range(len(items)))
    view: list[int] = list(keep)  # what the next processor sees; -1 is the planned summary
    summary = Item(role="assistant", tokens=0)
    stages: list[Stage] = []
    through = 0
    for position, name in enumerate(names):
        is_last = position == len(names) - 1
        seen = [items[index] if index >= 0 else summary for index in view]
        seen_truncated = frozenset(at for at, index in enumerate(view) if index in truncated)
        if name == TOOL_TRUNCATION:
            stage, found = tool_truncation(seen, config, is_last=is_last)
            truncated = frozenset(view[at] for at in found)
        elif name == SUMMARIZATION:
            stage, end = summarization(seen, config, seen_truncated, is_last=is_last)
            if not with_summary and stage.ran:
                stage, end = Stage(SUMMARIZATION, False, "runs on a worker", stage.estimated_savings), 0
            if end:
                through = view[end - 1] + 1
                prefix = sum(cost(seen[at], at in seen_truncated) for at in range(end))
                summary = Item(role="assistant", tokens=prefix - (stage.estimated_savings or 0))
                view = [-1, *view[end:]]
        else:
            budget = max(config.compaction_target_tokens - fixed_tokens, 0)
            stage, packed = backward_packing(seen, config, seen_truncated, is_last=is_last, budget=budget)
            if packed is not None:
                view = [view[at] for at in packed]
                keep = [index for index in view if index >= 0]
        stages.append(stage)
    kept = set(keep)
    return ChainResult(
        window=Window(keep=keep, truncate=frozenset(i for i in truncated if i in kept), stages=stages),
        summarize_through=through,
        truncated=truncated,
    )


def stages_run(stages: Sequence[Stage]) -> list[str]:
    return [stage.processor for stage in stages if stage.ran]
