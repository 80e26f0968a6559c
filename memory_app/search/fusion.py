"""How the two engines' rankings become one list (pure functions, no database).

Reciprocal-rank fusion (Cormack et al., 2009): an item's fused score is the sum over the engines
that found it of 1 / (K + its rank there), so the engines' incomparable scores (BM25, cosine)
never need calibrating. Two choices, measured on the planted-memory set of bench/search_bench.py:
K is small (10, not the paper's 60), so each list's first places count: at 60, rank 1 and rank 40
differ by 40 % and any item both engines list anywhere outranks the best item one engine found.
And a word match counts by how much of the question it covers (squared): the words are OR-ed, so
a text sharing one common word of six with the question is weak evidence, all six strong.
The fused score is then weighted by kind and, gently, by recency (it breaks ties between equally
ranked items; it must not reorder ranks). Items no longer live (invalidated facts, archived
record entries, disabled experiences) come after every live one: they only appear when a search
asks for them, and never outrank their replacement.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

RRF_K = 10
# The least a memory's age can multiply its score by (a new one gets 1.0).
RECENCY_FLOOR = 0.9
# Distilled memories carry more per word than raw conversation: a nudge, less than the gap
# between two neighbouring ranks (1/11 vs 1/12, 9 %), so it orders near-ties only.
KIND_WEIGHTS: Mapping[str, float] = {
    "fact": 1.04,
    "record": 1.02,
    "summary": 1.0,
    "experience": 1.0,
    "shared_memory": 1.0,
    "message": 1.0,
    "attachment": 0.98,
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
    lexical_weight: float  # how much of the query the text covers, squared (1.0: every term)
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


def rrf(ranked: Ranked, *, lexical_weight: float = 1.0) -> float:
    """The rank fusion of one item; `lexical_weight` scales its word match (see `coverage`)."""
    score = 0.0 if ranked.vector_rank is None else 1.0 / (RRF_K + ranked.vector_rank)
    if ranked.lexical_rank is not None:
        score += lexical_weight / (RRF_K + ranked.lexical_rank)
    return score


def coverage(text: str, terms: Sequence[str]) -> float:
    """The share of the query's terms the text contains (stems, matched as snippets mark them)."""
    if not terms:
        return 0.0
    words = {word.lower() for word in _WORD.findall(text)}
    return sum(1 for stem in map(_stem, terms) if any(word.startswith(stem) for word in words)) / len(terms)


def recency_factor(occurred_at: datetime, now: datetime, half_life_days: float) -> float:
    """1.0 for something written now, halfway to RECENCY_FLOOR one half-life ago: it orders
    near-ties and never buries an old relevant memory."""
    age_days = max((now - occurred_at).total_seconds(), 0.0) / 86400.0
    if half_life_days <= 0:
        return 1.0
    return RECENCY_FLOOR + (1.0 - RECENCY_FLOOR) * 0.5 ** (age_days / half_life_days)


def score(
    ranked: Ranked,
    *,
    kind: str,
    occurred_at: datetime,
    live: bool,
    now: datetime,
    half_life_days: float,
    lexical_weight: float = 1.0,
) -> Scored:
    recency = recency_factor(occurred_at, now, half_life_days)
    weight = KIND_WEIGHTS.get(kind, 1.0)
    fused = rrf(ranked, lexical_weight=lexical_weight) * recency * weight
    return Scored(
        ranked=ranked,
        recency_factor=recency,
        kind_weight=weight,
        lexical_weight=lexical_weight,
        fused_score=fused,
        live=live,
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
