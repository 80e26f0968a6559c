"""How the two engines' rankings become one list (pure functions, no database).

Reciprocal-rank fusion (Cormack et al., 2009): an item's fused score is the sum over the engines
that found it of 1 / (K + its rank there), so agreement between engines counts more than a high
score in one, and the engines' incomparable scores (BM25, cosine) never need calibrating. The
fused score is then weighted by recency (half-life decay, never below half) and by kind. Items
no longer live (invalidated facts, archived record entries, disabled experiences) come after
every live one: they only appear when a search asks for them, and never outrank their replacement.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

RRF_K = 60
# Distilled memories carry more per word than raw conversation.
KIND_WEIGHTS: Mapping[str, float] = {
    "fact": 1.1,
    "record": 1.05,
    "summary": 1.0,
    "experience": 1.0,
    "shared_memory": 1.0,
    "message": 1.0,
    "attachment": 0.95,
}
SNIPPET_CHARS = 240
# Words too common to say anything about what a question is after.
STOPWORDS = frozenset(
    """a an and are as at be been but by can could did do does for from had has have how i if in into is it its
    me my no not of on or our so than that the their them then there these they this to was we were what when
    where which who whom why will with would you your about any know tell us show find""".split()
)
_WORD = re.compile(r"[^\W_]+", re.UNICODE)


@dataclass(frozen=True)
class Ranked:
    """One item's place in each engine's list (1-based ranks; None: that engine did not find it)."""

    item_id: int
    lexical_rank: int | None
    lexical_score: float | None
    vector_rank: int | None
    vector_similarity: float | None


@dataclass(frozen=True)
class Scored:
    ranked: Ranked
    recency_factor: float
    kind_weight: float
    fused_score: float
    live: bool


def query_terms(query: str, limit: int = 32) -> list[str]:
    """The words of a query worth matching: lowercased, without stopwords, each once."""
    terms: list[str] = []
    for word in _WORD.findall(query.lower()):
        if word not in STOPWORDS and word not in terms:
            terms.append(word)
    return terms[:limit]


def fuse(lexical: Sequence[tuple[int, float]], vector: Sequence[tuple[int, float]]) -> list[Ranked]:
    """Both engines' (item id, score) lists, best first, as one list of items with their ranks."""
    ranks: dict[int, dict[str, tuple[int, float]]] = {}
    for rank, (item_id, score) in enumerate(lexical, start=1):
        ranks.setdefault(item_id, {})["lexical"] = (rank, score)
    for rank, (item_id, score) in enumerate(vector, start=1):
        ranks.setdefault(item_id, {})["vector"] = (rank, score)
    return [
        Ranked(
            item_id=item_id,
            lexical_rank=found["lexical"][0] if "lexical" in found else None,
            lexical_score=found["lexical"][1] if "lexical" in found else None,
            vector_rank=found["vector"][0] if "vector" in found else None,
            vector_similarity=found["vector"][1] if "vector" in found else None,
        )
        for item_id, found in ranks.items()
    ]


def rrf(ranked: Ranked) -> float:
    return sum(1.0 / (RRF_K + rank) for rank in (ranked.lexical_rank, ranked.vector_rank) if rank is not None)


def recency_factor(occurred_at: datetime, now: datetime, half_life_days: float) -> float:
    """1.0 for something written now, 0.75 one half-life ago, tending to 0.5: recency breaks
    ties between equally relevant memories but never buries an old relevant one."""
    age_days = max((now - occurred_at).total_seconds(), 0.0) / 86400.0
    if half_life_days <= 0:
        return 1.0
    return 0.5 + 0.5 * 0.5 ** (age_days / half_life_days)


def score(
    ranked: Ranked, *, kind: str, occurred_at: datetime, live: bool, now: datetime, half_life_days: float
) -> Scored:
    recency = recency_factor(occurred_at, now, half_life_days)
    weight = KIND_WEIGHTS.get(kind, 1.0)
    return Scored(
        ranked=ranked, recency_factor=recency, kind_weight=weight, fused_score=rrf(ranked) * recency * weight, live=live
    )


def order(scored: Sequence[Scored]) -> list[Scored]:
    """Live items first, then by fused score (ties: the item written last first)."""
    return sorted(scored, key=lambda s: (not s.live, -s.fused_score, -s.ranked.item_id))


def _stem(term: str) -> str:
    for suffix in ("ations", "ation", "ings", "ing", "ies", "ied", "ed", "es", "ly", "s"):
        if term.endswith(suffix) and len(term) - len(suffix) >= 3:
            return term[: -len(suffix)]
    return term


def snippet(text: str, terms: Sequence[str], width: int = SNIPPET_CHARS) -> str:
    """A window of `text` around its first matching words, each match marked as **word**."""
    stems = [_stem(term) for term in terms]
    matches = [m for m in _WORD.finditer(text) if any(m.group().lower().startswith(stem) for stem in stems)]
    flat = text.replace("\n", " ")
    if not matches:
        return flat[:width].rstrip() + ("…" if len(flat) > width else "")
    start = max(0, matches[0].start() - width // 4)
    if start:
        space = flat.find(" ", start)
        start = space + 1 if 0 <= space < matches[0].start() else start
    end = min(len(flat), start + width)
    pieces: list[str] = ["…"] if start else []
    cursor = start
    for match in matches:
        if match.start() < start or match.end() > end:
            continue
        pieces += [flat[cursor : match.start()], f"**{flat[match.start() : match.end()]}**"]
        cursor = match.end()
    pieces.append(flat[cursor:end])
    if end < len(flat):
        pieces.append("…")
    return "".join(pieces).strip()
