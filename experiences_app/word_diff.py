"""A line diff whose changed lines also say which words changed, for the review queue and the
revision compare view. Pure: text in, rows out; the templates colour them.

Lines are matched first (difflib on whole lines), then each replaced line is paired with its
counterpart and diffed again on tokens (words, runs of spaces, single punctuation marks), so a
one-word edit in a long `what` shows that word, not two whole paragraphs.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from typing import Literal

Kind = Literal["same", "add", "del"]

# Words (letters, digits, "_"), runs of whitespace, or one other character: a change to
# "os.path.exists()" marks "exists", not the whole call.
_TOKEN = re.compile(r"\w+|\s+|[^\w\s]", re.UNICODE)
# Past this many tokens a pair of lines is shown as a whole-line change: SequenceMatcher is
# quadratic in the worst case and a diff that long is no longer read word by word.
MAX_TOKENS = 4000


@dataclass(frozen=True)
class Segment:
    text: str
    changed: bool  # inserted (on an "add" row) or deleted (on a "del" row)


@dataclass(frozen=True)
class DiffRow:
    kind: Kind
    segments: list[Segment] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "".join(segment.text for segment in self.segments)


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(text)


def _merge(segments: list[Segment]) -> list[Segment]:
    """Neighbouring segments of the same kind as one (fewer elements to render). A space that
    happens to match between two changed words joins them: "print the" reads as one change."""
    segments = [segment for segment in segments if segment.text]
    for i in range(1, len(segments) - 1):
        here, before, after = segments[i], segments[i - 1], segments[i + 1]
        if not here.changed and here.text.isspace() and before.changed and after.changed:
            segments[i] = Segment(here.text, True)
    merged: list[Segment] = []
    for segment in segments:
        if not segment.text:
            continue
        if merged and merged[-1].changed == segment.changed:
            merged[-1] = Segment(merged[-1].text + segment.text, segment.changed)
        else:
            merged.append(segment)
    return merged


def word_pair(old: str, new: str) -> tuple[DiffRow, DiffRow]:
    """One changed line as a "del" row and an "add" row, each marking the tokens it lost or gained."""
    a, b = tokens(old), tokens(new)
    if len(a) + len(b) > MAX_TOKENS:
        return DiffRow("del", [Segment(old, True)]), DiffRow("add", [Segment(new, True)])
    removed: list[Segment] = []
    added: list[Segment] = []
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for op, a1, a2, b1, b2 in matcher.get_opcodes():
        if op == "equal":
            removed.append(Segment("".join(a[a1:a2]), False))
            added.append(Segment("".join(b[b1:b2]), False))
        else:
            removed.append(Segment("".join(a[a1:a2]), True))
            added.append(Segment("".join(b[b1:b2]), True))
    return DiffRow("del", _merge(removed)), DiffRow("add", _merge(added))


def diff_lines(old: list[str], new: list[str]) -> list[DiffRow]:
    """Every line of both sides in order: unchanged ones once, changed ones as a del/add pair with
    the changed words marked, lines only on one side as a whole del or add."""
    rows: list[DiffRow] = []
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    for op, a1, a2, b1, b2 in matcher.get_opcodes():
        if op == "equal":
            rows += [DiffRow("same", [Segment(line, False)]) for line in old[a1:a2]]
            continue
        gone, came = old[a1:a2], new[b1:b2]
        paired = min(len(gone), len(came)) if op == "replace" else 0
        deleted, inserted = [], []
        for before, after in zip(gone[:paired], came[:paired], strict=True):
            minus, plus = word_pair(before, after)
            deleted.append(minus)
            inserted.append(plus)
        deleted += [DiffRow("del", [Segment(line, True)]) for line in gone[paired:]]
        inserted += [DiffRow("add", [Segment(line, True)]) for line in came[paired:]]
        # All removed lines, then all added ones: how a reader compares a rewritten block.
        rows += deleted + inserted
    return rows


def diff_text(old: str, new: str) -> list[DiffRow]:
    """`diff_lines` over two texts split at newlines; [] when they are equal."""
    if old == new:
        return []
    return diff_lines(old.split("\n"), new.split("\n"))
