"""How stored message content shows on a page: text as markdown (people and models) or console
output (tools), JSON pretty-printed, images as thumbnails (data: and http(s) URLs only), tool calls
with their arguments, long output folded; and the short form of a message that the active-context
pane and the compaction diffs share. Used by the pages of several domains (sessions, compaction,
rounds), so it lives with the dashboard's shared helpers.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.utils.safestring import SafeString

from memory_app.conversations.images import MAX_URL_LENGTH
from memory_app.conversations.models import Message
from memory_app.dashboard.markdown import render_markdown

# Strings longer than this are shown as they are rather than parsed as JSON for pretty-printing.
MAX_PRETTY_JSON_CHARS = 200_000


# Output longer than this is folded: a preview, and the whole of it one click away.
FOLD_LINES = 14
FOLD_CHARS = 1_500
PREVIEW_LINES = 8
PREVIEW_CHARS = 700
# Output also shows its end: where pytest's FAILED lines, a traceback's error and a build's
# verdict are. Prose does not (it is read from the top).
PREVIEW_TAIL_LINES = 6
PREVIEW_TAIL_CHARS = 500
# Prose folds later than console output: an answer is read, a log is skimmed.
FOLD_MARKDOWN_LINES = 40
FOLD_MARKDOWN_CHARS = 5_000


@dataclass(frozen=True)
class Piece:
    """One renderable bit of message content. `kind` picks the template branch: "markdown" (a
    user's or assistant's text), "console" (a tool's text output, monospace as printed), "text"
    (other text), "json", "image", "note" or "refusal"."""

    kind: str
    text: str = ""
    src: str = ""

    @property
    def is_remote(self) -> bool:
        return self.src.startswith(("http://", "https://"))

    @property
    def host(self) -> str:
        """Who serves a remote image, for its placeholder (never the userinfo part of the URL)."""
        return (urlsplit(self.src).hostname or "") if self.is_remote else ""

    @functools.cached_property
    def line_count(self) -> int:
        return self.text.count("\n") + 1 if self.text else 0

    @property
    def is_long(self) -> bool:
        """Folded on the page: only a preview shows until the reader opens it."""
        if self.kind == "markdown":
            return self.line_count > FOLD_MARKDOWN_LINES or len(self.text) > FOLD_MARKDOWN_CHARS
        return self.kind in ("console", "json", "text") and (
            self.line_count > FOLD_LINES or len(self.text) > FOLD_CHARS
        )

    @property
    def preview(self) -> str:
        head = "\n".join(self.text.split("\n", PREVIEW_LINES)[:PREVIEW_LINES])
        return head[:PREVIEW_CHARS]

    @functools.cached_property
    def preview_tail(self) -> str:
        """The end of folded output, shown under its head ("" for prose, or when the head
        already reaches the end)."""
        if self.kind == "markdown":
            return ""
        tail = "\n".join(self.text.rsplit("\n", PREVIEW_TAIL_LINES)[-PREVIEW_TAIL_LINES:])[-PREVIEW_TAIL_CHARS:]
        return tail if len(self.preview) + len(tail) < len(self.text) else ""

    @property
    def hidden_label(self) -> str:
        """What lies between the head and the tail: "212 lines hidden"."""
        shown = self.preview.count("\n") + 1 + (self.preview_tail.count("\n") + 1 if self.preview_tail else 0)
        hidden = max(self.line_count - shown, 0)
        if hidden:
            return f"{hidden:,} line{'s' if hidden != 1 else ''} hidden"
        return f"{len(self.text) - len(self.preview) - len(self.preview_tail):,} characters hidden"

    @property
    def size_label(self) -> str:
        """What the fold hides, as read: "240 lines, 12.3 kB"."""
        size = len(self.text.encode())
        size_text = f"{size / 1000:.1f} kB" if size >= 1000 else f"{size} bytes"
        return f"{self.line_count:,} line{'s' if self.line_count != 1 else ''}, {size_text}"

    @functools.cached_property
    def html(self) -> SafeString:
        """A markdown piece rendered (escaped first: memory_app/dashboard/markdown.py)."""
        return render_markdown(self.text)

    @property
    def preview_html(self) -> SafeString:
        return render_markdown(self.preview)


@dataclass
class ToolCallView:
    call_id: str
    name: str
    arguments: str
    arguments_are_json: bool = True
    result: Message | None = None
    result_pieces: list[Piece] = field(default_factory=list)

    @property
    def argument_pieces(self) -> list[Piece]:
        """The arguments as one piece: indented JSON, or the raw text when it was not JSON."""
        if not self.arguments:
            return []
        return [Piece("json" if self.arguments_are_json else "console", text=self.arguments)]


_DATA_IMAGE = re.compile(r"data:image/(?:png|jpeg|gif|webp);base64,[A-Za-z0-9+/=\s]*")
_UNSAFE_URL_CHARS = re.compile(r"[\x00-\x20\x7f]")


def image_piece(ref: object) -> Piece:
    """A thumbnail for a data: image URL or an http(s) URL; a note for anything else."""
    if isinstance(ref, str) and ref.startswith("data:"):
        # Base64 is 4 characters per 3 bytes; bigger than the API ever accepts is not inlined.
        if len(ref) > settings.MAX_IMAGE_BYTES * 4 // 3 + 100:
            return Piece("note", text="image too large to preview")
        if _DATA_IMAGE.fullmatch(ref):
            return Piece("image", src=ref)
        return Piece("note", text="image not shown: not a png, jpeg, gif or webp data URL")
    if isinstance(ref, str) and len(ref) <= MAX_URL_LENGTH and not _UNSAFE_URL_CHARS.search(ref):
        parts = urlsplit(ref)
        if parts.scheme in ("http", "https") and parts.netloc:
            return Piece("image", src=ref)
    return Piece("note", text="image not shown: only data: images and http(s) URLs are displayed")


def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False, default=str)


# How the text of a message of each role is shown; other roles (and callers that name none) get plain text.
TEXT_KIND_BY_ROLE = {
    Message.Role.USER: "markdown",
    Message.Role.ASSISTANT: "markdown",
    Message.Role.SYSTEM: "markdown",
    Message.Role.TOOL: "console",
}


def _text_piece(text: str, text_kind: str = "text") -> Piece:
    """Text, or pretty JSON when the text is a JSON object/array (typical of tool results)."""
    stripped = text.strip()
    if stripped[:1] in ("{", "[") and len(stripped) <= MAX_PRETTY_JSON_CHARS:
        try:
            return Piece("json", text=pretty_json(json.loads(stripped)))
        except ValueError:
            pass
    return Piece(text_kind, text=text)


def _part_pieces(part: Any, text_kind: str = "text") -> list[Piece]:
    if not isinstance(part, dict):
        return [Piece("json", text=pretty_json(part))]
    kind = part.get("type")
    if kind == "text" and isinstance(part.get("text"), str):
        return [_text_piece(part["text"], text_kind)]
    if kind == "refusal":
        return [Piece("refusal", text=str(part.get("refusal", "")))]
    if kind == "image_url":
        image = part.get("image_url")
        return [image_piece(image.get("url") if isinstance(image, dict) else image)]
    if kind == "input_audio":
        audio = part.get("input_audio")
        audio = audio if isinstance(audio, dict) else {}
        return [Piece("note", text=f"audio ({audio.get('format') or 'unknown format'})")]
    if kind == "file":
        file = part.get("file")
        file = file if isinstance(file, dict) else {}
        return [Piece("note", text=f"file: {file.get('filename') or file.get('file_id') or 'unnamed'}")]
    return [Piece("json", text=pretty_json(part))]


def content_pieces(content: Any, images: Any = None, *, role: str | None = None) -> list[Piece]:
    """A message's content (text, content parts or a JSON object) and its images, ready to render.

    With the message's `role`, text becomes markdown (people and models write it) or console
    output (a tool printed it); without one it stays plain text."""
    text_kind = TEXT_KIND_BY_ROLE.get(role, "text") if role else "text"  # type: ignore[call-overload]
    pieces: list[Piece] = []
    if isinstance(content, str):
        if content:
            pieces.append(_text_piece(content, text_kind))
    elif isinstance(content, list):
        for part in content:
            pieces.extend(_part_pieces(part, text_kind))
    elif content is not None:
        pieces.append(Piece("json", text=pretty_json(content)))
    if isinstance(images, list):
        pieces.extend(image_piece(ref) for ref in images)
    return pieces


def _pretty_arguments(arguments: Any) -> tuple[str, bool]:
    """A call's arguments as indented JSON, and whether they were JSON at all (OpenAI sends a
    JSON string; a model can write an invalid one, which is shown as written)."""
    if isinstance(arguments, str):
        if len(arguments) > MAX_PRETTY_JSON_CHARS:
            return arguments, False
        try:
            return pretty_json(json.loads(arguments)), True
        except ValueError:
            return arguments, False
    return pretty_json(arguments), True


def tool_call_view(call: Any) -> ToolCallView | None:
    if not isinstance(call, dict) or not isinstance(call.get("id"), str):
        return None
    function = call.get("function")
    function = function if isinstance(function, dict) else {}
    arguments, is_json = _pretty_arguments(function.get("arguments"))
    return ToolCallView(
        call_id=call["id"],
        name=str(function.get("name") or "?"),
        arguments=arguments,
        arguments_are_json=is_json,
    )


@dataclass(frozen=True)
class CompactMessage:
    """A message in the short form of the active-context pane and the compaction diffs."""

    role: str
    pieces: list[Piece]
    calls: list[ToolCallView]
    name: str = ""
    tool_call_id: str = ""
    seq: int | None = None
    href: str = ""  # where the raw message is in the timeline
    tokens: int | None = None
    kind: str = "message"  # ContextEntry.kind, or "raw" in a diff
    truncated: bool = False


# The Message fields compact_message reads: a stored message becomes its `data` by these names.
COMPACT_FIELDS = ("role", "content", "images", "tool_calls", "tool_call_id", "name")


def _seq_href(seq: int, on_page: set[int]) -> str:
    return f"#m{seq}" if seq in on_page else f"?after={seq - 1}#m{seq}"


def compact_message(
    data: Mapping[str, Any], *, on_page: set[int], seq: int | None = None, **extra: Any
) -> CompactMessage:
    role = str(data.get("role") or "?")
    return CompactMessage(
        role=role,
        # Rendered as the timeline renders it: markdown prose, console tool output, folded when long.
        pieces=content_pieces(data.get("content"), data.get("images"), role=role),
        calls=[view for view in map(tool_call_view, data.get("tool_calls") or []) if view is not None],
        name=str(data.get("name") or ""),
        tool_call_id=str(data.get("tool_call_id") or ""),
        seq=seq,
        href=_seq_href(seq, on_page) if seq is not None else "",
        **extra,
    )
