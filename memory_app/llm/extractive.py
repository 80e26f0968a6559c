"""The offline backend: no model, deterministic extraction from the structured input.

Callers pass what they are asking about in `ChatRequest.metadata` (for a summary, the
`transcript` of messages) alongside the prompt an LLM would get; this backend ignores the
prompt and extracts: the latest user request, key sentences, identifiers kept verbatim,
errors, and the results of the most recent tool calls.
"""

from __future__ import annotations

import json
import re
from typing import Any

from memory_app import tokens
from memory_app.llm.base import ChatRequest, LLMPermanentError, LLMResult

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


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") == "text")
    return json.dumps(content, ensure_ascii=False)


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
                f"{names.get(m.get('tool_call_id'), 'tool')}: {_clip(_text(m.get('content')), 200)}"
                for m in transcript[index + 1 :]
                if m.get("role") == "tool" and m.get("tool_call_id") in names
            ]
    return []


def summarize_transcript(transcript: list[dict[str, Any]], *, max_tokens: int) -> str:
    user_texts = [_text(m.get("content")) for m in transcript if m.get("role") == "user"]
    events: list[str] = []
    errors: list[str] = []
    identifiers: dict[str, None] = {}
    for message in transcript:
        text = _text(message.get("content"))
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


class ExtractiveBackend:
    name = "extractive"
    model = "extractive-v1"
    supports_json_object = False

    def complete(self, request: ChatRequest) -> LLMResult:
        if request.purpose == "summarize":
            transcript = request.metadata.get("transcript") or []
            previous = request.metadata.get("previous_summary")
            if previous:
                transcript = [{"role": "assistant", "content": previous}, *transcript]
            # An extract as long as its source saves nothing: it gets a third of the source's
            # tokens (the compaction refuses a summary that does not shrink the context).
            source_tokens = sum(tokens.count_text(_text(m.get("content"))) for m in transcript)
            budget = min(request.max_tokens or 6000, max(source_tokens // 3, MIN_SUMMARY_TOKENS))
            text = summarize_transcript(transcript, max_tokens=budget)
            answer = {
                "user_request_summary": _clip(_text(_last_user(transcript))),
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
        raise LLMPermanentError(f"the extractive backend cannot serve {request.purpose!r}")
