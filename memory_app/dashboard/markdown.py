"""A small, safe Markdown renderer for the text agents and people write into messages.

Everything is HTML-escaped first; only then are Markdown marks turned into a fixed set of tags
(paragraphs, line breaks, headings, lists, quotes, code blocks, GitHub-style tables, inline
code, bold, italic and http(s) links). No raw HTML passes through and no attribute takes text other than an escaped
http(s) URL, so stored text can format itself but never run or load anything.

Headings inside a message are styled paragraphs, not <h1>-<h6>: a session page shows hundreds
of messages, and their headings would bury the page's own outline (and break heading order).
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable

from django.utils.safestring import SafeString, mark_safe

# Longer text is shown as plain text: the regexes are linear, but a page renders many messages.
MAX_MARKDOWN_CHARS = 100_000

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})\s*([\w+#.-]*)")
_HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)(?:\s+#+)?\s*$")
_BULLET = re.compile(r"^ {0,3}[-*+]\s+(.*)$")
_NUMBERED = re.compile(r"^ {0,3}(\d{1,9})[.)]\s+(.*)$")
_QUOTE = re.compile(r"^ {0,3}&gt;\s?(.*)$")  # the line is escaped already: ">" is "&gt;"
_RULE = re.compile(r"^ {0,3}([-*_])(\s*\1){2,}\s*$")
# A table's delimiter row, under its header row: | --- | :---: | ---: |
_TABLE_DELIMITER = re.compile(r"^ {0,3}\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$")

_CODE_SPAN = re.compile(r"(`+)(.+?)\1")
# [text](url): the URL of an escaped line holds no quote, "<" or ">" (they are entities now).
_LINK = re.compile(r"\[([^\]\n]+)\]\((https?://[^\s()]+)\)")
_BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*|__(?=\S)(.+?)(?<=\S)__")
_ITALIC = re.compile(r"(?<![\w*])\*(?=[^\s*])(.+?)(?<=[^\s*])\*(?![\w*])|(?<![\w_])_(?=\S)(.+?)(?<=\S)_(?![\w_])")
_SLOT = re.compile("\x00(\\d+)\x00")


def render_markdown(text: str) -> SafeString:
    """`text` as safe HTML: a `<div class="md">` of the blocks it contains."""
    if len(text) > MAX_MARKDOWN_CHARS:
        return mark_safe(f'<div class="md md-plain">{html.escape(text)}</div>')  # noqa: S308 - escaped
    # NUL marks the placeholders of the inline pass; it has no business in message text.
    lines = html.escape(text.replace("\x00", "\ufffd")).replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return mark_safe(f'<div class="md">{"".join(_blocks(lines))}</div>')  # noqa: S308 - built from escaped text


def _blocks(lines: list[str]) -> list[str]:
    out: list[str] = []
    paragraph: list[str] = []

    def flush() -> None:
        if paragraph:
            out.append(f"<p>{'<br>'.join(_inline(line.strip()) for line in paragraph)}</p>")
            paragraph.clear()

    index = 0
    while index < len(lines):
        line = lines[index]
        if fence := _FENCE.match(line):
            flush()
            mark = fence.group(1)
            body: list[str] = []
            index += 1
            # An unclosed fence runs to the end, as in CommonMark.
            while index < len(lines) and not lines[index].lstrip().startswith(mark):
                body.append(lines[index])
                index += 1
            language = fence.group(2)
            label = f' data-lang="{language}"' if language else ""
            code = "\n".join(body)
            out.append(f'<pre class="md-code" tabindex="0"{label}><code>{code}</code></pre>')
            index += 1
            continue
        if not line.strip():
            flush()
        elif _is_table_start(lines, index):
            flush()
            index = _table(lines, index, out)
            continue
        elif heading := _HEADING.match(line):
            flush()
            level = len(heading.group(1))
            out.append(f'<p class="md-h md-h{level}"><strong>{_inline(heading.group(2))}</strong></p>')
        elif _RULE.match(line):
            flush()
            out.append("<hr>")
        elif _BULLET.match(line) or _NUMBERED.match(line):
            flush()
            index = _list(lines, index, out)
            continue
        elif _QUOTE.match(line):
            flush()
            quoted: list[str] = []
            while index < len(lines) and (quote := _QUOTE.match(lines[index])):
                quoted.append(quote.group(1))
                index += 1
            out.append(f"<blockquote>{''.join(_blocks(quoted))}</blockquote>")
            continue
        else:
            paragraph.append(line)
        index += 1
    flush()
    return out


def _cells(line: str) -> list[str]:
    """A table row's cells: split at pipes not escaped as \\| (the line is HTML-escaped already)."""
    row = line.strip()
    row = row[1:] if row.startswith("|") else row
    row = row[:-1] if row.endswith("|") and not row.endswith("\\|") else row
    return [cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", row)]


def _is_table_start(lines: list[str], index: int) -> bool:
    """A header row with a pipe, then a delimiter row of as many cells."""
    if index + 1 >= len(lines) or "|" not in lines[index] or not _TABLE_DELIMITER.match(lines[index + 1]):
        return False
    return len(_cells(lines[index])) == len(_cells(lines[index + 1]))


def _table(lines: list[str], index: int, out: list[str]) -> int:
    """A GitHub-style table from `index`: header, delimiter (its colons align the columns), then
    every following line with a pipe. It scrolls sideways inside its message when wide."""
    header = _cells(lines[index])
    aligns = []
    for cell in _cells(lines[index + 1]):
        left, right = cell.startswith(":"), cell.endswith(":")
        aligns.append("center" if left and right else "right" if right else "left" if left else "")
    index += 2
    rows: list[list[str]] = []
    while index < len(lines) and "|" in lines[index] and lines[index].strip():
        cells = _cells(lines[index])
        rows.append((cells + [""] * len(header))[: len(header)])  # GitHub pads short rows, cuts long ones
        index += 1

    def table_cell(tag: str, text: str, align: str) -> str:
        style = f' class="md-{align}"' if align else ""
        return f"<{tag}{style}>{_inline(text)}</{tag}>"

    head = "".join(table_cell("th", text, align) for text, align in zip(header, aligns, strict=True))
    body = "".join(
        "<tr>" + "".join(table_cell("td", text, align) for text, align in zip(row, aligns, strict=True)) + "</tr>"
        for row in rows
    )
    table = f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    out.append(f'<div class="md-table" tabindex="0">{table}</div>')
    return index


def _list(lines: list[str], index: int, out: list[str]) -> int:
    """One flat list from `index`: its items, each with its indented continuation lines."""
    numbered = _NUMBERED.match(lines[index])
    tag, item_pattern = ("ol", _NUMBERED) if numbered else ("ul", _BULLET)
    start = f' start="{int(numbered.group(1))}"' if numbered and int(numbered.group(1)) != 1 else ""
    items: list[list[str]] = []
    while index < len(lines):
        line = lines[index]
        if item := item_pattern.match(line):
            items.append([item.group(item.lastindex or 1)])
        elif items and line.startswith((" ", "\t")) and line.strip():
            items[-1].append(line.strip())
        else:
            break
        index += 1
    rendered = "".join(f"<li>{'<br>'.join(_inline(part) for part in item)}</li>" for item in items)
    out.append(f"<{tag}{start}>{rendered}</{tag}>")
    return index


def _inline(text: str) -> str:
    """Code spans, links, bold and italic in one escaped line. Code and URLs are set aside
    first, so no later rule reads a `*` or `_` inside them."""
    slots: list[str] = []

    def keep(fragment: str) -> str:
        slots.append(fragment)
        return f"\x00{len(slots) - 1}\x00"

    text = _CODE_SPAN.sub(lambda m: keep(f"<code>{m.group(2).strip() or m.group(2)}</code>"), text)
    text = _LINK.sub(
        lambda m: keep(
            f'<a href="{m.group(2)}" rel="nofollow noopener noreferrer" target="_blank">{_emphasis(m.group(1))}</a>'
        ),
        text,
    )
    text = _emphasis(text)
    return _SLOT.sub(lambda m: slots[int(m.group(1))], text)


def _emphasis(text: str) -> str:
    text = _BOLD.sub(_wrap("strong"), text)
    return _ITALIC.sub(_wrap("em"), text)


def _wrap(tag: str) -> Callable[[re.Match[str]], str]:
    return lambda m: f"<{tag}>{m.group(1) if m.group(1) is not None else m.group(2)}</{tag}>"
