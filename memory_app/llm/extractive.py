"""The offline backend: no model, deterministic extraction from the structured input.

Callers pass what they are asking about in `ChatRequest.metadata` (for a summary, the
`transcript` of messages; for facts, the `lines` of the conversation) alongside the prompt an
LLM would get; this backend ignores the prompt. A summary extracts the latest user request,
key sentences, identifiers kept verbatim, errors, and the results of the most recent tool
calls; facts come from a few sentence patterns ("X lives in Y", "my name is X", ...); an
experience selection picks the candidates whose `when` the query and context match (BM25).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from memory_app.compaction.processors import content_text
from memory_app.conversations import tokens
from memory_app.facts.output import MAX_TRIPLES, normalize_term
from memory_app.llm.base import ChatRequest, LLMPermanentError, LLMResult
from memory_app.llm.relevance import DEFAULT_RELEVANCE_THRESHOLD, rank_by_relevance

_IDENTIFIER = re.compile(
    r"(?:https?://\S+)"  # URLs
    r"|(?:[\w.-]*/[\w./-]+)"  # paths
    r"|(?:\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b)"  # UUIDs
    r"|(?:\b[A-Za-z_]\w*\(\))"  # calls
    r"|(?:\b[a-z]+_[a-z0-9_]+\b)"  # snake_case
    r"|(?:\b[A-Z][a-z]+[A-Z]\w*\b)"  # CamelCase
)
_ERROR = re.compile(r"error|exception|traceback|failed|failure|denied|not found", re.I)
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
MAX_LINE_CHARS = 300
MIN_SUMMARY_TOKENS = 48


def _clip(text: str, limit: int = MAX_LINE_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _first_sentence(text: str) -> str:
    for sentence in _SENTENCE.split(text.strip()):
        if sentence.strip():
            return sentence.strip()
    return ""


def _latest_tool_results(transcript: list[dict[str, Any]]) -> list[str]:
    """Results of the last assistant tool-call batch: the state an agent is acting on."""
    for index in range(len(transcript) - 1, -1, -1):
        calls = transcript[index].get("tool_calls") or []
        if calls:
            names = {c["id"]: c.get("function", {}).get("name", "tool") for c in calls}
            return [
                f"{names.get(m.get('tool_call_id'), 'tool')}: {_clip(content_text(m.get('content')), 200)}"
                for m in transcript[index + 1 :]
                if m.get("role") == "tool" and m.get("tool_call_id") in names
            ]
    return []


def summarize_transcript(transcript: list[dict[str, Any]], *, max_tokens: int) -> str:
    user_texts = [content_text(m.get("content")) for m in transcript if m.get("role") == "user"]
    events: list[str] = []
    errors: list[str] = []
    identifiers: dict[str, None] = {}
    for message in transcript:
        text = content_text(message.get("content"))
        for call in message.get("tool_calls") or []:
            function = call.get("function", {})
            events.append(f"assistant called {function.get('name')}({_clip(str(function.get('arguments', '')), 120)})")
        if message.get("role") in ("user", "assistant") and text.strip():
            events.append(f"{message['role']}: {_clip(_first_sentence(text), 200)}")
        for sentence in _SENTENCE.split(text):
            if _ERROR.search(sentence):
                errors.append(_clip(sentence, 200))
        for match in _IDENTIFIER.findall(text):
            identifiers.setdefault(match, None)

    identifier_list = list(identifiers)[:60]
    sections = {
        # The latest request travels beside the summary as `user_request_summary`.
        "Goal": [_clip(user_texts[0])] if user_texts else [],
        "What happened": events[-30:],
        "Identifiers": identifier_list,
        "Errors and fixes": errors[-10:],
        "Open tool results": _latest_tool_results(transcript),
    }
    return _fit(sections, max_tokens)


# When over budget, items go from these sections first, oldest first; the goal is never
# dropped.
_DROP_ORDER = ("What happened", "Identifiers", "Errors and fixes", "Open tool results")


def _render(sections: dict[str, list[str]]) -> str:
    lines: list[str] = []
    for title, items in sections.items():
        if not items:
            continue
        lines.append(f"## {title}")
        if title == "Identifiers":
            lines.append("- " + ", ".join(items))
        else:
            lines.extend(f"- {item}" for item in items)
    return "\n".join(lines)


def _fit(sections: dict[str, list[str]], max_tokens: int) -> str:
    text = _render(sections)
    for title in _DROP_ORDER:
        while sections[title] and tokens.count_text(text) > max_tokens:
            del sections[title][0]
            text = _render(sections)
    return text


def _last_user(transcript: list[dict[str, Any]]) -> Any:
    users = [m.get("content") for m in transcript if m.get("role") == "user"]
    return users[-1] if users else ""


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


class ExtractiveBackend:
    name = "extractive"
    model = "extractive-v1"
    supports_json_object = False
    billable = False  # runs in-process: no tokens are bought

    def complete(self, request: ChatRequest) -> LLMResult:
        if request.purpose == "summarize":
            transcript = request.metadata.get("transcript") or []
            previous = request.metadata.get("previous_summary")
            if previous:
                transcript = [{"role": "assistant", "content": previous}, *transcript]
            # An extract as long as its source saves nothing: it gets a third of the source's
            # tokens (the compaction refuses a summary that does not shrink the context).
            source_tokens = sum(tokens.count_text(content_text(m.get("content"))) for m in transcript)
            budget = min(request.max_tokens or 6000, max(source_tokens // 3, MIN_SUMMARY_TOKENS))
            text = summarize_transcript(transcript, max_tokens=budget)
            answer = {
                "user_request_summary": _clip(content_text(_last_user(transcript))),
                "summary": text,
                "salient_facts": [],
                "open_threads": [],
                # Without a model to judge, keep the most recent images (the caller caps them).
                "keep_images": [
                    {"image_id": i, "context": "image from the conversation"}
                    for i in request.metadata.get("image_ids", [])
                ],
            }
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
