"""Seeded long agent sessions with planted items, for bench/retention_bench.py. Pure: no Django.

A session is a coding agent's working log: a user task, then steps of one assistant message with
tool calls, their tool outputs (file contents, test runs, logs, git history, ticket searches,
metrics), now and then an assistant decision and a user follow-up. Identifiers of six kinds
(file paths, ticket ids, numbers, people's names, commit hashes, function names) are everywhere,
as in a real log, repeating; some of them are *planted*: stated once at a known message (in a user request,
a decision, a tool call's arguments or the middle of a tool output) and referred back to by a
later message. Retention is the share of planted items whose exact text is still in a context.

Every identifier comes from one registry, which never draws a planted item again, so no item
can be matched by accident; `check` verifies that each planted item occurs exactly in the
messages the generator says it does.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

KINDS = ("path", "ticket", "number", "name", "commit", "function")
CARRIERS = ("user", "decision", "tool_call", "tool_output")
SYSTEM_PROMPT = (
    "You are a senior engineer working through a backlog with tools. Keep track of the tickets, files, "
    "people, numbers and commits the user and the tools mention: they come up again later."
)

_TOP = ("services", "libs", "apps", "infra", "tools", "web", "workers", "shared")
_SUB = ("billing", "ledger", "auth", "search", "ingest", "reports", "payments", "notify", "export", "sync")
_VERBS = ("reconcile", "flush", "rebuild", "validate", "publish", "resolve", "compact", "render", "retry", "merge")
_NOUNS = ("ledger", "invoice", "batch", "cursor", "token", "snapshot", "payload", "index", "queue", "window")
_EXT = ("py", "ts", "go", "sql", "yaml")
_PROJECTS = ("PAY", "OPS", "INFRA", "SEC", "DATA", "WEB")
_FIRST = (
    "Ingrid", "Tomasz", "Amara", "Kenji", "Lucia", "Omar", "Priya", "Sven", "Chidi", "Mei", "Rafael", "Noor",
    "Dmitri", "Aisha", "Mateo", "Hana", "Bjorn", "Zara", "Emeka", "Yuki",
)  # fmt: skip
_LAST = (
    "Okafor", "Lindqvist", "Haddad", "Moreau", "Tanaka", "Kowalski", "Ferreira", "Nakamura", "Adeyemi", "Castillo",
    "Novak", "Bergstrom", "Mensah", "Ibrahim", "Rossi", "Varga", "Delacroix", "Sato", "Oyelaran", "Petrov",
)  # fmt: skip
_WORDS = (
    "the handler retries after a transient failure and logs the attempt",
    "we keep the cursor in the session row so a restart resumes where it stopped",
    "the batch is written in one transaction and the index is refreshed afterwards",
    "a timeout here is not an error: the caller polls again",
    "the payload is validated before it is queued, never after",
    "this path is hot on month-end runs, keep it allocation-free",
    "callers must hold the lock; the function does not take it",
    "the snapshot is immutable once published",
)


class Registry:
    """Draws identifiers of each kind. A planted item is drawn once (`plant`) and never again:
    the noise (`of` and the kind methods) may repeat itself, as real logs do, but never draws a
    planted item, so a planted item is found only where the generator put it."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.planted: set[str] = set()

    def _fresh(self, make: Callable[[], str]) -> str:
        for _ in range(1000):
            value = make()
            if value not in self.planted:
                return value
        raise RuntimeError("identifier space exhausted")

    def plant(self, kind: str) -> str:
        value = self.of(kind)
        self.planted.add(value)
        return value

    def path(self) -> str:
        r = self.rng
        return self._fresh(
            lambda: (
                f"{r.choice(_TOP)}/{r.choice(_SUB)}/{r.choice(_NOUNS)}_{r.choice(_VERBS)}_"
                f"{r.randrange(16**4):04x}.{r.choice(_EXT)}"
            )
        )

    def ticket(self) -> str:
        return self._fresh(lambda: f"{self.rng.choice(_PROJECTS)}-{self.rng.randrange(1000, 10000)}")

    def number(self) -> str:
        # Five digits: line numbers, durations and counts in the noise have at most four.
        return self._fresh(lambda: str(self.rng.randrange(10000, 100000)))

    def name(self) -> str:
        return self._fresh(lambda: f"{self.rng.choice(_FIRST)} {self.rng.choice(_LAST)}")

    def commit(self) -> str:
        return self._fresh(lambda: f"{self.rng.randrange(16**7):07x}")

    def function(self) -> str:
        r = self.rng
        return self._fresh(lambda: f"{r.choice(_VERBS)}_{r.choice(_NOUNS)}_{r.choice(_NOUNS)}{r.randrange(10, 100)}")

    def of(self, kind: str) -> str:
        return getattr(self, kind)()


@dataclass
class Planted:
    item: str
    kind: str
    carrier: str
    planted_at: int  # index in `messages`
    referenced_at: list[int] = field(default_factory=list)


@dataclass
class GeneratedSession:
    seed: int
    system_prompt: str
    messages: list[dict[str, Any]]
    planted: list[Planted]


# --- the text of each kind of message ------------------------------------------------------------

_PLANT_USER = {
    "path": "Start with {x}, that is where the bug lives.",
    "ticket": "This work is tracked in {x}; reference it in every commit.",
    "number": "The hard limit we agreed with finance is {x} requests per hour.",
    "name": "{x} owns this service; ask for the review there.",
    "commit": "The regression appeared after {x}, so compare against it.",
    "function": "The failing entry point is {x}, start from its callers.",
}
_PLANT_DECISION = {
    "path": "Decision: the retry logic moves into {x}.",
    "ticket": "Decision: the duplicate gets closed in favour of {x}.",
    "number": "Decision: the batch size is pinned to {x}.",
    "name": "Decision: {x} signs off the migration before release.",
    "commit": "Decision: revert {x} before the release branch is cut.",
    "function": "Decision: {x} becomes the single entry point for this flow.",
}
_REFER = {
    "path": "Back to {x}: the change there still needs a test.",
    "ticket": "Following up on {x}: the fix is ready for review.",
    "number": "Keeping the limit at {x} as agreed earlier.",
    "name": "As planned, {x} will review this part.",
    "commit": "Compared with {x} again: same behaviour as before it.",
    "function": "{x} is still the entry point, so the change goes there.",
}
_TOOL_FOR_KIND = {
    "path": ("read_file", "path"),
    "ticket": ("get_ticket", "id"),
    "number": ("set_config", "value"),
    "name": ("assign_reviewer", "person"),
    "commit": ("git_show", "rev"),
    "function": ("find_references", "symbol"),
}
_PLAIN_TOOLS = ("read_file", "run_tests", "grep", "tail_log", "git_log", "search_tickets", "metrics")
_PLANT_OUTPUT_LINE = {
    "path": "NOTE: generated code must be regenerated from {x} after schema changes",
    "ticket": "WARNING: known issue, see {x} before changing this behaviour",
    "number": "quota.max_requests_per_hour = {x}  # set by finance, do not raise",
    "name": "# maintainer: {x} (pager rotation, reviews every change to this module)",
    "commit": "bisect: first bad commit is {x}",
    "function": "entry point registered: {x} (all other callers are deprecated)",
}
_NEXT_TASKS = (
    "Now look at why the nightly export is slow.",
    "Next, make the retry behaviour configurable.",
    "Please check the flaky test in the sync worker.",
    "Can you find out why the invoice totals drift by a cent?",
    "Next: the search index rebuild runs out of memory.",
    "Look into the auth token refresh race next.",
    "Now the report renderer drops the last page; find out why.",
)


class _Writer:
    """Renders message texts; every identifier goes through the registry."""

    def __init__(self, rng: random.Random, registry: Registry) -> None:
        self.rng = rng
        self.ids = registry

    def code_file(self, lines: int) -> str:
        r = self.rng
        out = [f"# {self.ids.path()}", "from __future__ import annotations", ""]
        while len(out) < lines:
            name = self.ids.function()
            out += [
                f"def {name}(batch, *, limit={r.randrange(10, 1000)}):",
                f'    """{r.choice(_WORDS).capitalize()}."""',
                f"    rows = {self.ids.function()}(batch)",
                f"    if len(rows) > limit:  # see {self.ids.path()}",
                "        raise ValueError('too many rows: %d' % len(rows))",
                f"    return [{self.ids.function()}(row) for row in rows]",
                "",
            ]
        return "\n".join(out[:lines])

    def test_run(self, lines: int) -> str:
        r = self.rng
        out = [f"============ test session starts ({r.randrange(100, 999)} items) ============"]
        while len(out) < lines - 2:
            verdict = "PASSED" if r.random() < 0.85 else "FAILED"
            out.append(f"{self.ids.path()}::test_{self.ids.function()} {verdict} [{r.randrange(1, 100)}%]")
            if verdict == "FAILED":
                out.append(f"  E   AssertionError: {r.randrange(1, 999)} != {r.randrange(1, 999)}")
                out.append(f"  {self.ids.path()}:{r.randrange(1, 999)}: in {self.ids.function()}")
        out.append(
            f"============ {r.randrange(1, 9)} failed, {r.randrange(50, 900)} passed in {r.random() * 60:.2f}s ==="
        )
        return "\n".join(out)

    def log(self, lines: int) -> str:
        r = self.rng
        levels = ("INFO", "INFO", "INFO", "DEBUG", "WARNING", "ERROR")
        out = []
        for _ in range(lines):
            out.append(
                f"2026-11-{r.randrange(10, 28)}T{r.randrange(24):02d}:{r.randrange(60):02d}:{r.randrange(60):02d}Z "
                f"{r.choice(levels)} {self.ids.function()} {r.choice(_WORDS)} "
                f"(took {r.randrange(1, 999)} ms, worker {r.randrange(1, 64)})"
            )
        return "\n".join(out)

    def git_log(self, lines: int) -> str:
        r = self.rng
        out = []
        for _ in range(lines):
            out.append(
                f"{self.ids.commit()} {self.ids.name()}  {r.choice(_VERBS)} {r.choice(_NOUNS)} in {self.ids.path()}"
            )
        return "\n".join(out)

    def tickets(self, lines: int) -> str:
        r = self.rng
        out = []
        for _ in range(lines):
            out.append(
                f"{self.ids.ticket()}  [{r.choice(('open', 'in progress', 'closed'))}]  {r.choice(_WORDS)} "
                f"(assignee {self.ids.name()})"
            )
        return "\n".join(out)

    def metrics(self, lines: int) -> str:
        r = self.rng
        out = []
        for _ in range(lines):
            out.append(
                f"{self.ids.function()}  p50={r.randrange(1, 999)}ms  p99={r.randrange(1, 9999)}ms  "
                f"errors={r.randrange(0, 999)}  calls={r.randrange(1, 9999)}"
            )
        return "\n".join(out)

    def tool_output(self, tool: str, lines: int) -> str:
        make = {
            "read_file": self.code_file,
            "find_references": self.code_file,
            "run_tests": self.test_run,
            "grep": self.log,
            "tail_log": self.log,
            "git_log": self.git_log,
            "git_show": self.git_log,
            "assign_reviewer": self.git_log,
            "search_tickets": self.tickets,
            "get_ticket": self.tickets,
            "metrics": self.metrics,
            "set_config": self.metrics,
        }[tool]
        return make(lines)


def _output_lines(rng: random.Random, profile: str) -> int:
    """Lines of one tool output: mostly short, some long, a few very long (~20-30 tokens a line)."""
    if profile == "light":
        return rng.randrange(2, 8)
    roll = rng.random()
    if roll < 0.7:
        return rng.randrange(4, 18)
    if roll < 0.9:
        return rng.randrange(18, 45)
    return rng.randrange(70, 130)  # a whole file or a long log: over tool truncation's 1200 tokens


@dataclass
class _Slot:
    kind: str  # "task" | "user" | "call" | "output" | "decision"
    plant: tuple[str, str] | None = None  # (kind, item)
    refer: list[tuple[str, str]] = field(default_factory=list)
    call_ids: list[str] = field(default_factory=list)


def _skeleton(rng: random.Random, messages: int) -> list[_Slot]:
    slots = [_Slot("task")]
    while len(slots) < messages:
        if rng.random() < 0.12:
            slots.append(_Slot("user"))
        calls = 1 if rng.random() < 0.75 else 2
        slots.append(_Slot("call"))
        slots += [_Slot("output") for _ in range(calls)]
        if rng.random() < 0.18:
            slots.append(_Slot("decision"))
    # End on a complete turn: trim back to the last output or decision within the target.
    while len(slots) > messages or slots[-1].kind in ("call", "user"):
        slots.pop()
    return slots


_CARRIER_SLOT = {"user": "user", "decision": "decision", "tool_call": "call", "tool_output": "output"}


def generate(seed: int, messages: int, *, items: int | None = None, profile: str = "agent") -> GeneratedSession:
    """A session of about `messages` messages with `items` planted items (default one per 12 messages).

    Items are planted in the first 90 % of the session, each referred back to once by a user or
    assistant message 2-15 % of the session later. `profile="light"` keeps tool outputs short
    (the read benchmark's sessions of up to 100k messages).
    """
    rng = random.Random(seed)
    registry = Registry(rng)
    writer = _Writer(rng, registry)
    slots = _skeleton(rng, messages)
    n = len(slots)
    count = items if items is not None else max(n // 12, 1)
    planted: list[Planted] = []
    by_carrier = {
        carrier: [i for i, s in enumerate(slots) if s.kind == slot and 0 < i < int(n * 0.9)]
        for carrier, slot in _CARRIER_SLOT.items()
    }
    speakers = [i for i, s in enumerate(slots) if s.kind in ("user", "decision", "call")]
    for number in range(count):
        kind = KINDS[number % len(KINDS)]
        carrier = CARRIERS[(number // len(KINDS) + number) % len(CARRIERS)]
        free = [i for i in by_carrier[carrier] if slots[i].plant is None]
        if not free:
            continue
        at = rng.choice(free)
        item = registry.plant(kind)
        slots[at].plant = (kind, item)
        later = [i for i in speakers if at + max(2, int(n * 0.02)) <= i <= at + max(4, int(n * 0.15))]
        refs = [rng.choice(later)] if later else []
        for ref in refs:
            slots[ref].refer.append((kind, item))
        planted.append(Planted(item, kind, carrier, at, refs))

    out: list[dict[str, Any]] = []
    call_number = 0
    pending_calls: list[tuple[str, str]] = []  # (call id, tool name) awaiting outputs
    for index, slot in enumerate(slots):
        refer = " ".join(_REFER[k].format(x=x) for k, x in slot.refer)
        if slot.kind == "task":
            text = (
                "We have a backlog of production issues in the billing and sync services. Work through them "
                "one by one with the tools, explain each decision, and keep the tickets updated."
            )
            out.append({"role": "user", "content": text})
        elif slot.kind == "user":
            parts = [rng.choice(_NEXT_TASKS)]
            if slot.plant:
                parts.append(_PLANT_USER[slot.plant[0]].format(x=slot.plant[1]))
            if refer:
                parts.append(refer)
            out.append({"role": "user", "content": " ".join(parts)})
        elif slot.kind == "decision":
            parts = []
            if slot.plant:
                parts.append(_PLANT_DECISION[slot.plant[0]].format(x=slot.plant[1]))
            else:
                parts.append(f"Decision: {rng.choice(_WORDS)}, so {writer.ids.function()} stays as it is.")
            parts.append(f"Reason: {rng.choice(_WORDS)}.")
            if refer:
                parts.append(refer)
            out.append({"role": "assistant", "content": " ".join(parts)})
        elif slot.kind == "call":
            outputs = 0
            while index + 1 + outputs < n and slots[index + 1 + outputs].kind == "output":
                outputs += 1
            calls = []
            for position in range(outputs):
                call_number += 1
                call_id = f"call_{seed}_{call_number}"
                arguments: dict[str, Any]
                if position == 0 and slot.plant:
                    tool, argument = _TOOL_FOR_KIND[slot.plant[0]]
                    arguments = {argument: slot.plant[1]}
                else:
                    tool = rng.choice(_PLAIN_TOOLS)
                    arguments = {"query": f"{rng.choice(_VERBS)} {rng.choice(_NOUNS)}", "limit": rng.randrange(5, 50)}
                calls.append(
                    {"id": call_id, "type": "function", "function": {"name": tool, "arguments": json.dumps(arguments)}}
                )
                pending_calls.append((call_id, tool))
            text = f"Let me {rng.choice(_VERBS)} the {rng.choice(_NOUNS)} handling and check what the tools say."
            if refer:
                text = f"{refer} {text}"
            out.append({"role": "assistant", "content": text, "tool_calls": calls})
        else:  # output
            call_id, tool = pending_calls.pop(0)
            body = writer.tool_output(tool, _output_lines(rng, profile))
            if slot.plant:
                lines = body.split("\n")
                lines.insert(len(lines) // 2, _PLANT_OUTPUT_LINE[slot.plant[0]].format(x=slot.plant[1]))
                body = "\n".join(lines)
            out.append({"role": "tool", "tool_call_id": call_id, "name": tool, "content": body})
    session = GeneratedSession(seed=seed, system_prompt=SYSTEM_PROMPT, messages=out, planted=planted)
    check(session)
    return session


# --- finding items in a context ------------------------------------------------------------------


def message_text(message: dict[str, Any]) -> str:
    """Everything of a message an LLM reads: its text and its tool calls' names and arguments."""
    content = message.get("content")
    if isinstance(content, list):
        text = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    elif isinstance(content, str):
        text = content
    elif content is None:
        text = ""
    else:
        text = json.dumps(content, ensure_ascii=False)
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        text += f"\n{function.get('name', '')}({function.get('arguments', '')})"
    return text


def _is_word(char: str) -> bool:
    return char.isalnum() or char in "_-"


def contains(text: str, item: str) -> bool:
    """Whether `item` occurs in `text` exactly, not inside a longer identifier ("PAY-1234" is
    not found in "PAY-12345"). A plain substring scan: a look-behind regex is ~50x slower."""
    start = text.find(item)
    while start >= 0:
        end = start + len(item)
        if (start == 0 or not _is_word(text[start - 1])) and (end == len(text) or not _is_word(text[end])):
            return True
        start = text.find(item, start + 1)
    return False


def present(items: list[Planted], messages: list[dict[str, Any]]) -> list[bool]:
    """For each planted item, whether its exact text is anywhere in the messages."""
    text = "\n".join(message_text(m) for m in messages)
    return [contains(text, p.item) for p in items]


def check(session: GeneratedSession) -> None:
    """Each planted item occurs in exactly its planting and referring messages."""
    texts = [message_text(m) for m in session.messages]
    for planted in session.planted:
        where = [i for i, text in enumerate(texts) if contains(text, planted.item)]
        expected = sorted({planted.planted_at, *planted.referenced_at})
        if where != expected:
            raise AssertionError(f"{planted.item!r} found in messages {where}, expected {expected}")
