"""The offline backend: no model, deterministic extraction from the structured input.

Callers pass what they are asking about in `ChatRequest.metadata` (for a summary, the
`transcript` of messages and the `previous_summary`; for facts, the `lines` of the
conversation) alongside the prompt an LLM would get; this backend reads the prompt only for
the budget it states. A summary is an extractive one: the user's requests, and the salient
lines of the transcript and of the previous summary quoted verbatim (identifiers, decisions,
findings, real errors, the latest tool results), ranked and fitted to the budget the request
gives (see "Summaries" below); facts come from a few sentence patterns ("X lives in Y", "my
name is X", ...); an experience selection picks the candidates whose `when` the query and
context match (BM25).
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from memory_app.conversations import tokens
from memory_app.facts.output import MAX_TRIPLES, normalize_term
from memory_app.llm.base import ChatRequest, LLMPermanentError, LLMResult
from memory_app.llm.relevance import DEFAULT_RELEVANCE_THRESHOLD, rank_by_relevance
from memory_client.vocabulary.messages import content_text

# --- Summaries: salient lines, quoted verbatim, ranked, within the budget ---------------------
#
# A summary is built from candidate lines: every user request; the assistant's sentences that
# name something (an identifier: a path, URL, ticket id, hash, version, number with a unit,
# code name or proper name) or state a decision or a finding; the tool calls with their
# arguments; real error lines (one per kind, counted); and the lines of tool outputs that name
# something. Lines are quoted verbatim (a long one is cut at clause boundaries), so every
# identifier they name survives as written. They are ranked by who said them (the user's
# requests, then what the user and the assistant say, then the calls, errors and latest
# results, then tool output), within that by how often their identifiers are mentioned and how
# recent they are (tool-output lines first by how informative they are: rare words over
# boilerplate a tool prints every time). Each rank is taken in turn: first every line that fits
# in its short form (its clauses that name something), then, most salient first, whole; a line
# that names only what is already kept waits for what is left at the end. So the budget the
# request gives is filled, and when it is short the least salient lines go first and the older
# ones get terse before anything named is lost. The previous summary's lines are candidates
# too, ranked by the label they carry ("user:", "assistant:", "called", "tool NAME:") and older
# than everything new: a summary chains across compactions, and what one kept is evicted only
# by something more salient.

MAX_LINE_CHARS = 300
FACT_CHARS = 240  # a fact line longer than this is cut at clause boundaries
SHORT_CHARS = 120  # a fact's short form when it names nothing
REQUEST_CHARS = 400
MIN_SUMMARY_TOKENS = 48
DEFAULT_SUMMARY_TOKENS = 6000  # a request without max_tokens: the compaction default
NARRATIVE_SHARE = 1 / 3  # goal, progress, latest statement
REQUEST_SHARE = 0.35  # of the budget: the newest requests ranked above everything else
ERROR_SHARE, MAX_ERRORS = 0.1, 10
THREAD_SHARE, MAX_THREADS, THREAD_CHARS = 0.1, 5, 200
MAX_TOOLS_LISTED = 8
MIN_SECTION_TOKENS = 40  # the errors and open threads get at least this much of a small budget

_EXTENSIONS = (
    "py|pyi|ipynb|js|mjs|cjs|ts|tsx|jsx|go|rs|java|kt|rb|php|c|h|cc|cpp|hpp|cs|swift|scala|sql|yaml|yml|json|"
    "toml|ini|cfg|conf|md|rst|txt|sh|bash|html|css|scss|xml|csv|tsv|lock|proto|tf|env|log|pdf|png|jpg|svg"
)
_UNITS = (
    r"(?:%|(?:ms|us|ns|s|secs?|seconds?|mins?|minutes?|h|hrs?|hours?|days?|weeks?|months?|years?|b|kb|mb|gb|tb|"
    r"kib|mib|gib|tib|k|x|px|rps|qps|usd|eur|gbp|chf|tokens?|rows?|requests?|items?|bytes?|lines?|users?|"
    r"cores?|workers?|retries|times)\b)"
)
_TOKEN = re.compile(
    r"(?P<url>\bhttps?://[^\s<>\"'`)\]}]+)"
    r"|(?P<path>(?<![\w/.-])(?:~|\.{1,2})?/?(?:[\w.@+-]+/)+[\w.@+-]+)"
    r"|(?P<uuid>\b[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}\b)"
    r"|(?P<ticket>\b[A-Z][A-Z0-9]{1,9}-\d+\b|(?<![\w&#])#\d+\b)"
    r"|(?P<date>\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?(?:\.\d+)?Z?)?)"
    r"|(?P<hash>\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b)"
    rf"|(?P<file>\b[\w-]+\.(?:{_EXTENSIONS})\b)"
    r"|(?P<dotted>\b[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+\b)"
    r"|(?P<code>\b_*[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+\b"  # snake_case, SCREAMING_CASE
    r"|\b[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+\b"  # CamelCase
    r"|\b[a-z]+[0-9]*(?:[A-Z][a-z0-9]*)+\b"  # mixedCase
    r"|\b[A-Za-z_]\w{2,}(?=\())"  # called: name(
    r"|(?P<version>\bv?\d+(?:\.\d+){2,}\b|\bv\d+(?:\.\d+)?\b)"
    rf"|(?P<number>(?<![\w.])[$€£]?\d[\d,]*(?:\.\d+)?(?: ?{_UNITS})?)"
)
_CAPITALISED = re.compile(r"\b[A-Z][a-z]+(?:['\u2019-][A-Z]?[a-z]+)?\b")
# Capitalised words that start sentences or are keywords, not names.
_NOT_NAMES = frozenset(
    "a an the this that these those it its i we you he she they my our your his her their if when while but and "
    "or so then now next please let as in on at for from to with after before also here there what why how where "
    "which who can could should would will do does did is are was were be been yes no not ok okay hi hello hey "
    "thanks thank sure well great good fine done note true false none null decision reason error warning info "
    "debug fixed found both each every all some any maybe perhaps only just first last still again back keep "
    "keeping following compared start try check look make see use run".split()
)
_SENTENCE_START = ".!?:;\"'`(*#>|[{-\u2013\u2014\u2022"
_WORD = re.compile(r"[a-z]{3,}")
# Real errors: an exception or error type with its message, a traceback, a failed test or
# command, a CLI's "error:" line; not every log line that merely has an ERROR level.
_ERROR_LINE = re.compile(
    r"\b[A-Z]\w*(?:Error|Exception|Fault)\b(?::|$)|^\s*Traceback \(most recent call last\)|\bFAILED\b"
    r"|\b[1-9]\d* failed\b|(?i:^\s*(?:error|fatal|panic)(?:\[[\w-]+\])?:|\bpermission denied\b|\bcommand not found\b"
    r"|\bno such file or directory\b|\bsegmentation fault\b|\bexit(?:ed)? (?:code|status) [1-9]\d*|\bnon-zero exit\b)"
)
_FENCE = re.compile(r"^\s*(?:```|~~~)")
MAX_PROSE_LINES = 20  # a message with more lines than this is pasted material after its first lines
_DECISION = re.compile(
    r"\b(?:decided|decide|decision|we will|we'll|chose|choose|chosen|going with|go with|agreed|settled on|"
    r"the plan is|instead of|switch(?:ed)? to|will use|must not|should not)\b",
    re.I,
)
_FINDING = re.compile(
    r"\b(?:because|caused by|root cause|the fix|fixed|resolved|turns out|found that|the problem|the issue|"
    r"works now|confirmed|the reason)\b",
    re.I,
)
_CLAUSE = re.compile(r"(?<=[;,])\s+|\s+(?=\(|--?\s)")
_SHORT_CLAUSE = re.compile(r"(?<=[;,:.!?])\s+")
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_HEADING = re.compile(r"^(?:#{1,6}\s+(.+?)|([A-Z][\w ]{0,40}):)\s*$")
_COUNT_SUFFIX = re.compile(r"\s\(x(\d+)\)$")
_COVERED = re.compile(r"^Covered so far: (\d+) messages \((\d+) user, (\d+) assistant, (\d+) tool results\)")
_TOOL_COUNT = re.compile(r"([\w.:-]+) x(\d+)")

REQUEST, FACT, ERROR, THREAD = "request", "fact", "error", "thread"
TIER_REQUEST, TIER_TALK, TIER_CALL, TIER_TOOL = 4, 3, 2, 1


def _clip(text: str, limit: int = MAX_LINE_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _sentence_start(text: str, at: int) -> bool:
    before = text[:at].rstrip()
    return not before or before[-1] in _SENTENCE_START or before[-1].isdigit()


def _names(text: str, taken: list[tuple[int, int]]) -> list[str]:
    """Proper names: a run of capitalised words (after any leading sentence word), or one
    capitalised word where a sentence does not start."""
    words = [m for m in _CAPITALISED.finditer(text) if not any(a <= m.start() < b for a, b in taken)]
    runs: list[list[re.Match[str]]] = []
    for match in words:
        if runs and text[runs[-1][-1].end() : match.start()] == " ":
            runs[-1].append(match)
        else:
            runs.append([match])
    names = []
    for run in runs:
        while run and run[0].group().casefold() in _NOT_NAMES:
            run = run[1:]
        if len(run) >= 2 or (run and not _sentence_start(text, run[0].start())):
            names.append(text[run[0].start() : run[-1].end()])
    return names


def _keep_token(kind: str, value: str) -> bool:
    if kind == "path":
        last = value.rsplit("/", 1)[-1]
        return value.count("/") >= 2 or value[0] in "/~." or "." in last or "_" in value
    if kind == "dotted":
        return any(len(part) > 2 for part in value.split("."))
    if kind == "number":
        digits = sum(c.isdigit() for c in value)
        return digits >= 3 or not value[-1].isdigit() or "." in value or value[0] in "$€£"
    return True


def identifiers(text: str) -> list[str]:
    """What a line names, verbatim: URLs, paths, ids, dates, hashes, code names, versions,
    numbers that carry information (3+ digits, a unit, a decimal or a currency), and proper names."""
    found: list[str] = []
    spans: list[tuple[int, int]] = []
    for match in _TOKEN.finditer(text):
        kind = match.lastgroup or ""
        value = match.group().rstrip(".,;:!?'\"")
        if value and _keep_token(kind, value):
            found.append(value)
        spans.append(match.span())
    return found + _names(text, spans)


def _words(text: str, ids: frozenset[str]) -> set[str]:
    """The plain words of a line: what is left once its identifiers are taken out."""
    for name in ids:
        text = text.replace(name, " ")
    return set(_WORD.findall(text.casefold()))


@dataclass
class _Candidate:
    text: str
    section: str
    tier: int
    position: float
    ids: frozenset[str]
    always: bool = False  # kept even if it names nothing new: a request, a decision, a finding
    count: int = 1  # errors: how often this kind of error line was seen
    score: float = 0.0  # how informative a tool-output line is
    mentions: int = 0
    shortened: bool = False  # kept in its short form: the budget had no room for the whole line
    _short: str | None = None
    _costs: dict[bool, int] = field(default_factory=dict)

    def rendered(self) -> str:
        text = self.short_form() if self.shortened else self.text
        return text + (f" (x{self.count})" if self.count > 1 else "")

    def short_form(self) -> str:
        """The line cut to its clauses that name something (its label kept): what a fact
        becomes when the budget is short. A line that names nothing is clipped."""
        if self._short is None:
            label = _LABEL.match(self.text)
            head, body = (self.text[: label.end()], self.text[label.end() :]) if label else ("", self.text)
            parts = _SHORT_CLAUSE.split(body)
            clauses = [c for c in parts if any(i in c for i in self.ids)]
            if clauses and parts[0] not in clauses and parts[0].endswith(":") and len(parts[0]) <= 20:
                clauses.insert(0, parts[0])  # what kind of statement it is: "Decision:", "Root cause:"
            short = head + " … ".join(clauses) if clauses else _clip(self.text, SHORT_CHARS)
            self._short = short if len(short) < len(self.text) else self.text
        return self._short

    def cost(self) -> int:
        """Tokens of the line as rendered (its bullet and line break included)."""
        if self.shortened not in self._costs:
            self._costs[self.shortened] = tokens.count_text(self.rendered()) + 2
        return self._costs[self.shortened]


# Where a candidate came from: "user: ", "assistant: ", "system: ", "user block: " (code or logs
# quoted in a message), "tool NAME: ", "called NAME(".
_LABEL = re.compile(r"^(?:(?:user|assistant|system|user block|assistant block|tool [\w.:-]+):\s|called [\w.:-]+\()")
_ERROR_LABEL = re.compile(r"^[\w.:-]+:\s")  # the tool an error line came from


def _candidate(text: str, section: str, tier: int, position: float, **kwargs: Any) -> _Candidate:
    """A candidate line; what it names is read from its text after the label ("tool grep: ",
    "called grep(": the tool's name is in the progress line, not a fact)."""
    label = (_ERROR_LABEL if section == ERROR else _LABEL).match(text)
    body = text[label.end() :] if label else text
    return _Candidate(text, section, tier, position, frozenset(identifiers(body)), **kwargs)


def _pieces(text: str, limit: int = FACT_CHARS) -> list[str]:
    """A long line cut at clause boundaries into pieces of at most `limit` characters."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return [text] if text else []
    pieces: list[str] = []
    current = ""
    for clause in _CLAUSE.split(text):
        if current and len(current) + 1 + len(clause) > limit:
            pieces.append(current)
            current = ""
        current = f"{current} {clause}".strip()
        while len(current) > limit:
            pieces.append(current[: limit - 1] + "…")
            current = current[limit - 1 :]
    if current:
        pieces.append(current)
    return pieces


def _prose_and_block(text: str) -> tuple[str, list[str]]:
    """A message's prose, and the lines it quotes: fenced blocks, and whatever follows the first
    lines of a message too long to be prose (a pasted log or file)."""
    prose: list[str] = []
    block: list[str] = []
    inside = False
    for line in text.splitlines():
        if _FENCE.match(line):
            inside = not inside
        elif inside:
            block.append(line)
        else:
            prose.append(line)
    if len(prose) > MAX_PROSE_LINES:
        block[:0] = prose[3:]
        prose = prose[:3]
    return "\n".join(prose), block


def _sentence_key(sentence: str) -> str:
    return " ".join(sentence.casefold().split()).rstrip(".!?")


@dataclass
class _Previous:
    goal: str = ""
    latest: str = ""
    covered: list[int] = field(default_factory=lambda: [0, 0, 0, 0])
    tools: Counter[str] = field(default_factory=Counter)
    requests: list[str] = field(default_factory=list)
    facts: list[str] = field(default_factory=list)
    errors: list[tuple[str, int]] = field(default_factory=list)
    threads: list[str] = field(default_factory=list)


def _parse_previous(text: str) -> _Previous:
    """The parts of an earlier summary (this backend's, or any model's: unknown lines are facts)."""
    previous = _Previous()
    section, in_errors, in_goal = "summary", False, False
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if line.startswith("[") and line.endswith("]") and len(line) < 60:
            title = line[1:-1].casefold()
            section = next(
                (
                    name
                    for word, name in (("request", "requests"), ("fact", "facts"), ("thread", "threads"))
                    if word in title
                ),
                "summary",
            )
            in_errors = in_goal = False
            continue
        item = line[2:].strip() if line.startswith(("- ", "* ")) else line
        if section == "requests":
            previous.requests.append(item)
        elif section == "threads":
            previous.threads.append(item)
        elif section == "facts":
            previous.facts.append(item)
        elif line.startswith("Goal:"):
            previous.goal = line.removeprefix("Goal:").strip()
        elif line.startswith("Latest:"):
            previous.latest = line.removeprefix("Latest:").strip()
        elif match := _COVERED.match(line):
            previous.covered = [int(g) for g in match.groups()]
            tools = line.partition("tools used:")[2]
            previous.tools.update({name: int(n) for name, n in _TOOL_COUNT.findall(tools)})
        elif heading := _HEADING.match(line):  # "Errors seen:", or another summarizer's "## Goal"
            title = (heading.group(1) or heading.group(2)).casefold()
            in_errors, in_goal = "error" in title, "goal" in title and not previous.goal
        elif in_goal:
            previous.goal, in_goal = item, False
        elif in_errors and line.startswith("- "):
            count = _COUNT_SUFFIX.search(item)
            previous.errors.append((_COUNT_SUFFIX.sub("", item), int(count.group(1)) if count else 1))
        else:
            in_errors = False
            previous.facts.append(item)
    return previous


def _fact_tier(line: str) -> int:
    """A carried fact keeps the rank of who said it: its label."""
    if line.startswith("called "):
        return TIER_CALL
    if line.startswith(("tool ", "user block:", "assistant block:")):
        return TIER_TOOL
    return TIER_TALK  # "user:", "assistant:", or a line another summarizer wrote


def _call_line(function: dict[str, Any]) -> str:
    name = str(function.get("name") or "tool")
    raw = function.get("arguments")
    try:
        arguments = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        arguments = raw
    if isinstance(arguments, dict):
        shown = ", ".join(
            f"{key}={_clip(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False), 120)}"
            for key, value in arguments.items()
        )
    else:
        shown = _clip(str(arguments or ""), 160)
    return f"called {name}({shown})"


def _error_shape(text: str) -> str:
    return re.sub(r"\d+", "#", _TOKEN.sub("<>", text.casefold()))


class _Summarizer:
    def __init__(self, transcript: list[dict[str, Any]], previous: _Previous) -> None:
        self.previous = previous
        self.candidates: list[_Candidate] = []
        self.by_text: dict[str, _Candidate] = {}
        self.mentions: Counter[str] = Counter()
        self.document_words: dict[float, set[str]] = {}  # message (position) -> its words
        self.errors: dict[str, _Candidate] = {}
        self.seen_sentences: set[str] = set()
        self.requests: list[_Candidate] = []
        self.goal_request: _Candidate | None = None
        self.goal = previous.goal
        self.latest = ""
        self.covered = list(previous.covered)
        self.tools: Counter[str] = Counter(previous.tools)
        self._carry(previous)
        self._read(transcript)

    # --- candidates ---

    def _add(self, candidate: _Candidate) -> None:
        """A candidate, once: a line said again moves to where it was said last. Every
        occurrence counts: the mentions of what it names, the messages its words are in."""
        self._count(candidate)
        key = " ".join(candidate.text.casefold().split())
        known = self.by_text.get(key)
        if known is None:
            self.by_text[key] = candidate
            self.candidates.append(candidate)
            return
        known.position = max(known.position, candidate.position)
        known.always = known.always or candidate.always
        if candidate.tier > known.tier:  # e.g. the last tool result, also a line of an earlier output
            known.tier, known.section = candidate.tier, candidate.section

    def _count(self, candidate: _Candidate) -> None:
        self.mentions.update(candidate.ids)
        self.document_words.setdefault(candidate.position, set()).update(
            _words(_LABEL.sub("", candidate.text), candidate.ids)
        )

    def _error(self, text: str, position: float, count: int = 1) -> None:
        text = _clip(text, FACT_CHARS)
        shape = _error_shape(text)
        known = self.errors.get(shape)
        if known is not None:  # the latest of its kind stands for all of them
            count += known.count
        self.errors[shape] = _candidate(text, ERROR, TIER_CALL, position, count=count)
        self._count(self.errors[shape])

    def _request(self, text: str, position: float) -> None:
        fresh = []
        for sentence in _SENTENCE.split(text):
            key = _sentence_key(sentence)
            if key and key not in self.seen_sentences:
                self.seen_sentences.add(key)
                fresh.append(sentence.strip())
        if not fresh:
            return
        joined = " ".join(fresh)
        if not self.goal:
            self.goal = _clip(joined, MAX_LINE_CHARS)
        pieces = _pieces(joined)
        shown = pieces.pop(0)
        while pieces and len(shown) + 1 + len(pieces[0]) <= REQUEST_CHARS:
            shown = f"{shown} {pieces.pop(0)}"
        self.requests.append(_candidate(shown, REQUEST, TIER_REQUEST, position, always=True))
        if len(self.requests) == 1:
            self.goal_request = self.requests[0]
        for piece in pieces:  # a long request: the rest of it, ranked like what the assistant says
            self._add(_candidate(f"user: {piece}", FACT, TIER_TALK, position))

    def _carry(self, previous: _Previous) -> None:
        items: list[tuple[str, str]] = [
            *((REQUEST, r) for r in previous.requests),
            *((FACT, f) for f in previous.facts),
            *((THREAD, t) for t in previous.threads),
        ]
        start = -len(items) - len(previous.errors) - 2
        if previous.latest:  # what the assistant said last then: its sentences, like any of its words
            self._talk("assistant", previous.latest, start - 1)
        for offset, (section, text) in enumerate(items):
            position = start + offset
            if section == REQUEST:
                self._request(text, position)
            elif section == THREAD:  # no longer the latest results: a tool line like any other
                self._add(_candidate(text, FACT, TIER_TOOL, position))
            else:
                tier = _fact_tier(text)
                self._add(_candidate(text, FACT, tier, position, always=tier == TIER_TALK))
        for offset, (text, count) in enumerate(previous.errors):
            self._error(text, start + len(items) + offset, count)

    def _read(self, transcript: list[dict[str, Any]]) -> None:
        call_names: dict[str, str] = {}
        for position, message in enumerate(transcript):
            role = message.get("role")
            text = content_text(message.get("content"))
            self.covered[0] += 1
            prose, block = _prose_and_block(text)
            if role == "user":
                self.covered[1] += 1
                self._request(prose, position)
                self._lines("user block", block, position)
            elif role == "assistant":
                self.covered[2] += 1
                if text.strip():
                    self.latest = prose or text
                self._talk("assistant", prose, position)
                self._lines("assistant block", block, position)
                for call in message.get("tool_calls") or []:
                    function = call.get("function") or {}
                    name = str(function.get("name") or "tool")
                    call_names[str(call.get("id"))] = name
                    self.tools[name] += 1
                    line = _call_line(function)
                    for piece in _pieces(line):
                        candidate = _candidate(piece, FACT, TIER_CALL, position)
                        if candidate.ids:
                            self._add(candidate)
            elif role == "tool":
                self.covered[3] += 1
                name = str(message.get("name") or call_names.get(str(message.get("tool_call_id")), "tool"))
                self._lines(f"tool {name}", text.splitlines(), position)
            else:  # a system message (or another role): what the assistant was told
                self._talk("system", prose, position)
                self._lines("assistant block", block, position)

    def _talk(self, role: str, text: str, position: float) -> None:
        """The sentences that name something, decide something or state a finding."""
        for sentence in _SENTENCE.split(text):
            cue = bool(_DECISION.search(sentence) or _FINDING.search(sentence))
            for piece in _pieces(sentence):
                candidate = _candidate(f"{role}: {piece}", FACT, TIER_TALK, position, always=cue)
                if candidate.ids or cue:
                    self._add(candidate)

    def _lines(self, label: str, lines: list[str], position: float) -> None:
        """Tool output, or code and logs quoted in a message: its error lines, and its lines
        that name something (ranked by how informative they are)."""
        source = label.removeprefix("tool ")
        for line in lines:
            if not line.strip():
                continue
            if _ERROR_LINE.search(line):
                self._error(f"{source}: {line.strip()}", position)
                continue
            for piece in _pieces(line):
                candidate = _candidate(f"{label}: {piece}", FACT, TIER_TOOL, position)
                if candidate.ids:
                    self._add(candidate)

    # --- ranking and the budget ---

    def _rank(self, extra: list[_Candidate]) -> list[_Candidate]:
        """Every candidate (and `extra`), the most salient first."""
        candidates = [*self.candidates, *self.errors.values(), *extra]
        frequency: Counter[str] = Counter()
        for words in self.document_words.values():
            frequency.update(words)
        documents = max(len(self.document_words), 1)
        for candidate in candidates:
            candidate.mentions = max((self.mentions[i] for i in candidate.ids), default=0)
            if candidate.tier == TIER_TOOL:
                # How informative: the mean inverse document frequency (over the messages) of
                # its three rarest words. Boilerplate a tool prints every time scores low.
                words = _words(_LABEL.sub("", candidate.text), candidate.ids)
                rarest = sorted((math.log(documents / frequency[w]) for w in words if frequency[w]), reverse=True)
                candidate.score = round(sum(rarest[:3]) / 3, 1)

        def key(c: _Candidate) -> tuple[float, ...]:
            if c.tier == TIER_TOOL:
                return (c.tier, c.score, c.mentions, c.position)
            return (c.tier, c.mentions, c.position)

        return sorted(candidates, key=key, reverse=True)

    def select(self, budget: int) -> tuple[list[_Candidate], int]:
        """The candidates kept within `budget` tokens, most salient first, and the tokens they
        take. The newest requests (and the first, the goal) come first, up to their share of the
        budget; then the ranked candidates, each if it names something not yet kept (or is a
        request, decision, finding, error or open thread); then, with what is left, the lines
        that only repeat what is kept."""
        requests = sorted(self.requests, key=lambda c: c.position, reverse=True)
        used = 0
        for request in requests:  # the newest requests first, up to their share
            used += request.cost()
            if used > budget * REQUEST_SHARE and request is not requests[0] and request is not self.goal_request:
                request.tier = TIER_TALK
        ranked = [r for r in requests if r.tier == TIER_REQUEST] + self._rank(
            [r for r in requests if r.tier != TIER_REQUEST]
        )
        kept: list[_Candidate] = []
        covered: set[str] = set()
        deferred: list[_Candidate] = []
        spent = {ERROR: 0, THREAD: 0}
        limits = {
            ERROR: (max(budget * ERROR_SHARE, MIN_SECTION_TOKENS), MAX_ERRORS),
            THREAD: (max(budget * THREAD_SHARE, MIN_SECTION_TOKENS), MAX_THREADS),
        }
        counts = {ERROR: 0, THREAD: 0}
        left = budget
        for _, group in itertools.groupby(ranked, key=lambda c: c.tier):
            admitted = []
            for candidate in group:  # as many as fit, in their short form
                if left < 8:
                    break
                if not candidate.always and candidate.section == FACT and not candidate.ids - covered:
                    if candidate.tier >= TIER_TALK:
                        deferred.append(candidate)
                    continue
                candidate.shortened = candidate.section == FACT and candidate.short_form() != candidate.text
                cost = candidate.cost()
                if cost > left:
                    continue
                if candidate.section in spent:
                    share, most = limits[candidate.section]
                    if counts[candidate.section] >= most or spent[candidate.section] + cost > share:
                        continue
                    spent[candidate.section] += cost
                    counts[candidate.section] += 1
                admitted.append(candidate)
                covered |= candidate.ids
                left -= cost
            for candidate in admitted:  # then whole, the most salient first, before a lower tier
                if candidate.shortened:
                    short = candidate.cost()
                    candidate.shortened = False
                    if candidate.cost() - short <= left:
                        left -= candidate.cost() - short
                    else:
                        candidate.shortened = True
            kept += admitted
        for candidate in deferred:
            if left < 8:
                break
            if candidate.cost() <= left:
                kept.append(candidate)
                left -= candidate.cost()
        return kept, budget - left

    def threads(self, transcript: list[dict[str, Any]]) -> None:
        """The results of the last tool-call batch: the state the agent is acting on."""
        for index in range(len(transcript) - 1, -1, -1):
            calls = transcript[index].get("tool_calls") or []
            if not calls:
                continue
            names = {c.get("id"): (c.get("function") or {}).get("name", "tool") for c in calls}
            for message in transcript[index + 1 :]:
                if message.get("role") == "tool" and message.get("tool_call_id") in names:
                    text = _clip(content_text(message.get("content")), THREAD_CHARS)
                    line = f"tool {names[message.get('tool_call_id')]}: {text}"
                    self._add(_candidate(line, THREAD, TIER_CALL, len(transcript), always=True))
            return

    def narrative(self) -> list[str]:
        total, users, assistants, results = self.covered
        tools = ", ".join(f"{name} x{n}" for name, n in self.tools.most_common(MAX_TOOLS_LISTED))
        lines = []
        if self.goal:
            lines.append(f"Goal: {_clip(self.goal)}")
        lines.append(
            f"Covered so far: {total} messages ({users} user, {assistants} assistant, {results} tool results)"
            + (f"; tools used: {tools}" if tools else "")
            + "."
        )
        latest = _clip(self.latest) if self.latest.strip() else self.previous.latest
        if latest:
            lines.append(f"Latest: {latest}")
        return lines


def summarize(
    transcript: list[dict[str, Any]], *, max_tokens: int, previous_summary: str | None = None
) -> dict[str, Any]:
    """The summary's parts as the compaction prompt asks for them (without `keep_images`):
    `user_request_summary` (every request, deduplicated; the newest and the first kept first
    when they do not all fit), `summary` (goal, progress, the latest statement, the errors
    seen), `salient_facts` (verbatim lines, in the order they were said) and `open_threads`
    (the last tool results), together within `max_tokens`."""
    summarizer = _Summarizer(transcript, _parse_previous(previous_summary or ""))
    summarizer.threads(transcript)
    narrative: list[str] = []
    for line in summarizer.narrative():  # the goal; then progress and the latest, within a third
        if not narrative:
            fits = tokens.count_text(line) <= max_tokens
            narrative.append(line if fits else _clip(line, max(max_tokens * 3, 20)))
        elif tokens.count_text("\n".join([*narrative, line])) <= max_tokens * NARRATIVE_SHARE:
            narrative.append(line)
    fixed = tokens.count_text("\n".join(narrative)) + 4
    kept, _ = summarizer.select(max(max_tokens - fixed, 0))
    while True:
        answer = _answer(narrative, kept)
        if not kept or tokens.count_text(render(answer)) <= max_tokens:
            return answer
        kept.pop()  # the least salient first (an estimate that ran over)


def _answer(narrative: list[str], kept: list[_Candidate]) -> dict[str, Any]:
    def of(section: str) -> list[str]:
        return [c.rendered() for c in sorted((c for c in kept if c.section == section), key=lambda c: c.position)]

    requests = of(REQUEST)
    errors = of(ERROR)
    return {
        "user_request_summary": requests[0] if len(requests) == 1 else "\n".join(f"- {r}" for r in requests),
        "summary": "\n".join([*narrative, *(["Errors seen:", *(f"- {e}" for e in errors)] if errors else [])]),
        "salient_facts": of(FACT),
        "open_threads": of(THREAD),
    }


def summarize_transcript(transcript: list[dict[str, Any]], *, max_tokens: int) -> str:
    """The summary of `transcript` as one text (requests, summary, facts, threads)."""
    return render(summarize(transcript, max_tokens=max_tokens))


def render(answer: dict[str, Any]) -> str:
    parts = [answer["user_request_summary"], answer["summary"]]
    parts += [f"- {fact}" for fact in answer["salient_facts"]]
    parts += [f"- {thread}" for thread in answer["open_threads"]]
    return "\n".join(p for p in parts if p)


# --- Facts: a few sentence patterns, first match wins -----------------------------------------


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str]
    predicate: str  # "{p}" takes the predicate from the sentence
    replaces: bool = False  # a single-valued relation: the new value replaces the old


_LEAD = r"^(?:.*?,\s*)?"  # "Hi, my name is Ann": a greeting before a comma is no subject
_APOS = "['\\u2019]"  # straight or typographic apostrophe (re reads the escape)
_FIRST_PERSON = [
    _Rule(re.compile(_LEAD + rf"my name(?: is|{_APOS}s) (?P<o>.+)$", re.I), "name", True),
    _Rule(re.compile(_LEAD + r"i live in (?P<o>.+)$", re.I), "lives in", True),
    _Rule(re.compile(_LEAD + r"i work (?P<p>at|for) (?P<o>.+)$", re.I), "works {p}", True),
    _Rule(re.compile(_LEAD + r"i was born in (?P<o>.+)$", re.I), "was born in", True),
    _Rule(re.compile(_LEAD + r"i (?:really )?like (?P<o>.+)$", re.I), "likes"),
    _Rule(re.compile(_LEAD + rf"(?:i am|i{_APOS}m) an? (?P<o>.+)$", re.I), "is a"),
    _Rule(re.compile(_LEAD + r"my (?P<p>[\w -]{1,40}?) is (?P<o>.+)$", re.I), "{p}"),
]
_THIRD_PERSON = [
    _Rule(re.compile(rf"^(?P<s>.+?){_APOS}s (?P<p>[\w -]{{1,40}}?) is (?P<o>.+)$", re.I), "{p}"),
    _Rule(re.compile(r"^(?P<s>.+?) lives in (?P<o>.+)$", re.I), "lives in", True),
    _Rule(re.compile(r"^(?P<s>.+?) works (?P<p>at|for) (?P<o>.+)$", re.I), "works {p}", True),
    _Rule(re.compile(r"^(?P<s>.+?) (?:was|is) born in (?P<o>.+)$", re.I), "was born in", True),
    _Rule(re.compile(r"^(?P<s>.+?) likes (?P<o>.+)$", re.I), "likes"),
    _Rule(re.compile(r"^(?P<s>.+?) is an? (?P<o>.+)$", re.I), "is a"),
    _Rule(re.compile(r"^(?P<s>.+?) is (?P<o>.+)$", re.I), "is"),
]
_VERBS = r"(?:is|was|lives?|works?|likes?)"
# "Ann lives in Oslo and works at Acme": a new clause when a verb follows within a few words.
_AND_CLAUSE = re.compile(rf",?\s+and\s+(?=(?:[\w'\u2019-]+\s+){{0,4}}?{_VERBS}\b)", re.I)
_STARTS_WITH_VERB = re.compile(rf"^{_VERBS}\b", re.I)
# Words that make "X is Y" a pronoun, a question, a condition or a negation rather than a fact.
_NOT_A_SUBJECT = frozenset(
    "i it this that there here what which who whom where when why how he she they we you these those if "
    "but so and or because my your our his her their its everything nothing something anything all no not "
    "never none".split()
)
_BAD_SUBJECT_CHARS = re.compile(r"[=(){}<>\[\]\"`,]")
MAX_FACT_SUBJECT_WORDS = 5
MAX_FACT_OBJECT_CHARS = 200  # a longer "object" is a sentence, not a value


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text) if s.strip()]


def _clauses(sentence: str) -> list[str]:
    return [c.strip() for c in _AND_CLAUSE.split(sentence) if c.strip()]


def _good_subject(subject: str) -> bool:
    words = subject.split()
    return (
        0 < len(words) <= MAX_FACT_SUBJECT_WORDS
        and not _NOT_A_SUBJECT & {w.casefold() for w in words}
        and not _BAD_SUBJECT_CHARS.search(subject)
    )


def _good_object(obj: str) -> bool:
    first = obj.split(maxsplit=1)[0].casefold() if obj else ""
    return 0 < len(obj) <= MAX_FACT_OBJECT_CHARS and first not in {"not", "never", "no"}


def _match_clause(clause: str, speaker: str) -> tuple[dict[str, Any], str] | None:
    """The fact a clause states and its subject as written (for a following "and ..."), or None."""
    for rules, first_person in ((_FIRST_PERSON, True), (_THIRD_PERSON, False)):
        for rule in rules:
            match = rule.pattern.match(clause)
            if match is None:
                continue
            subject = "I" if first_person else match.group("s").strip()
            obj = match.group("o").strip().rstrip(".!;:,").strip()
            if not (first_person or _good_subject(subject)) or not _good_object(obj):
                return None  # the clause is not a fact; a weaker rule would only find a worse one
            groups = {k: v.strip().lower() for k, v in match.groupdict().items() if k == "p" and v}
            fact = {
                "subject": speaker if first_person else subject,
                "predicate": rule.predicate.format(**groups),
                "object": obj,
                "confidence": None,  # patterns have no calibrated confidence
                "replaces": rule.replaces,
            }
            return fact, subject
    return None


def _facts_in_text(text: str, speaker: str) -> list[dict[str, Any]]:
    facts: list[dict[str, Any]] = []
    for sentence in _sentences(text):
        if sentence.endswith("?"):
            continue  # a question states nothing
        previous_subject = ""
        for clause in _clauses(sentence.rstrip(".!;")):
            if previous_subject and _STARTS_WITH_VERB.match(clause):
                clause = f"{previous_subject} {clause}"  # "... and works at Acme" shares the subject
            found = _match_clause(clause, speaker)
            previous_subject = found[1] if found else ""
            if found:
                facts.append(found[0])
    return facts


def extract_facts(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The facts the lines state, each once, in order; "I"/"my" is the speaking role."""
    seen: set[tuple[str, str, str]] = set()
    facts: list[dict[str, Any]] = []
    for line in lines:
        speaker = str(line.get("role") or "user")
        for fact in _facts_in_text(content_text(line.get("content")), speaker):
            key = (normalize_term(fact["subject"]), normalize_term(fact["predicate"]), normalize_term(fact["object"]))
            if key not in seen and len(facts) < MAX_TRIPLES:
                seen.add(key)
                facts.append(fact)
    return facts


def _message_tokens(message: dict[str, Any]) -> int:
    """A message's text and tool-call arguments, in tokens."""
    calls = message.get("tool_calls") or []
    arguments = [str((call.get("function") or {}).get("arguments") or "") for call in calls]
    return sum(tokens.count_text(text) for text in [content_text(message.get("content")), *arguments])


_STATED_BUDGET = re.compile(r"\bat most (\d+) tokens\b")


def _asked_tokens(request: ChatRequest) -> int:
    """The answer's budget: the request's max_tokens, else what the prompt states, else the default."""
    if request.max_tokens:
        return request.max_tokens
    for message in reversed(request.messages):
        stated = _STATED_BUDGET.search(content_text(message.get("content")))
        if stated:
            return int(stated.group(1))
    return DEFAULT_SUMMARY_TOKENS


class ExtractiveBackend:
    name = "extractive"
    model = "extractive-v1"
    supports_json_object = False
    billable = False  # runs in-process: no tokens are bought

    def complete(self, request: ChatRequest) -> LLMResult:
        if request.purpose == "summarize":
            transcript = request.metadata.get("transcript") or []
            previous = request.metadata.get("previous_summary") or ""
            # An extract as long as its source saves nothing: it gets at most a third of the
            # source's tokens (the compaction refuses a summary that does not shrink the context).
            source_tokens = tokens.count_text(previous) + sum(_message_tokens(m) for m in transcript)
            budget = min(_asked_tokens(request), max(source_tokens // 3, MIN_SUMMARY_TOKENS))
            answer = summarize(transcript, max_tokens=budget, previous_summary=previous)
            # Without a model to judge, keep the most recent images (the caller caps them).
            answer["keep_images"] = [
                {"image_id": i, "context": "image from the conversation"} for i in request.metadata.get("image_ids", [])
            ]
            return LLMResult(text=json.dumps(answer, ensure_ascii=False), backend=self.name, model=self.model)
        if request.purpose == "extract_facts":
            answer = {"facts": extract_facts(request.metadata.get("lines") or [])}
            return LLMResult(text=json.dumps(answer, ensure_ascii=False), backend=self.name, model=self.model)
        if request.purpose == "select_experiences":
            return self._select_experiences(request)
        raise LLMPermanentError(f"the extractive backend cannot serve {request.purpose!r}")

    def _select_experiences(self, request: ChatRequest) -> LLMResult:
        """The selection's answer form, `{"exp-id": true/false}` for every candidate, chosen by BM25 relevance.

        The selection prompt is ignored: `metadata` carries the candidates ({"exp_id", "when"}),
        the query and the context the prompt was rendered from.
        """
        metadata = request.metadata
        candidates = [(str(c["exp_id"]), str(c.get("when") or "")) for c in metadata.get("candidates") or []]
        chosen = set(
            rank_by_relevance(
                str(metadata.get("query") or ""),
                str(metadata.get("context") or ""),
                candidates,
                threshold=DEFAULT_RELEVANCE_THRESHOLD,
            )
        )
        answer = {exp_id: exp_id in chosen for exp_id, _ in candidates}
        return LLMResult(text=json.dumps(answer, ensure_ascii=False), backend=self.name, model=self.model)
