"""How the two engines' candidates become one list (pure functions, no database).

Each candidate's relevance is a weighted sum of what the engines and the item say about it, passed
through a logistic function; the weights were chosen on development sets (the conversations of
`bench/recall_sets.py --seed 1` and the search bench's planted memories) and are reported on a
separate test set (docs/recall.md, bench/README.md):

- its word match, as a share of the best word match of this query (BM25 score / the top score:
  BM25's scale changes from query to query, its ratio does not), counted in proportion to how much
  of the query the best word match covers (one word of five: weak evidence; all of them: strong);
- how far its similarity to the query by meaning (cosine) is below the best candidate's: one close
  to the best is likely as good, one far below it likely noise;
- its substance: how many content words it holds, up to SUBSTANCE_WORDS, for raw conversation
  (messages, attachments). A short reply ("Cool! What did it look like?") is close in meaning to
  many questions and holds no answer: without this, short generic turns found by meaning alone
  crowd out a strong word match. Distilled memories (facts, summaries ...) count in full;
- whether the query names its speaker (a gentle nudge: a question may name the wrong person);
- whether it was said within the time the query names ("in March 2023", "last July").

Rank fusion (RRF, the previous method) threw the scores away and kept the ranks: a turn the words
rank 3rd with 90 % of the top score weighed like one with 10 %, and a short generic turn the model
ranks 1st outranked both. The relevance is then weighted by kind and, gently, by recency (it orders
near-ties; it must not reorder clear differences). An item whose own text holds every identifier
the query names (a word of letters and digits: an error code, a ticket, a commit) comes before every
item that does not: the embedding model reads such words as noise ("ERR4059" is as close to
"ERR4012" as to itself), so their exact match is the only evidence. Items no longer live (invalidated facts, archived
record entries, disabled experiences) come after every live one: they only appear when a search
asks for them, and never outrank their replacement.
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

# The relevance model: one weight per input (Features.inputs), chosen by `python -m bench recall_fit
# --tune` (bench/README.md) on two development sets, the conversations of bench/data/recall_dev.json
# and the planted memories of the search bench's quality set. Three weights are priors, not fitted:
# the word match at 2.5, since the synthetic sets paraphrase more than people do (on real long
# conversations a plain BM25 beats the embedding model alone by a wide margin); the speaker at a
# gentle 0.3, since a question may name the wrong person; the time at 3.0, the value that gave the
# dev set's temporal questions their best recall. The similarity counts through its gap to the best
# candidate's: within one query the two order alike, and the gap says how far from the best it is.
# BIAS makes the relevance a figure between 0 and 1; it does not change the order.
WEIGHTS: Mapping[str, float] = {
    "lexical": 2.5,
    "similarity_gap": 6.35,
    "substance": 3.6,
    "speaker_named": 0.3,
    "in_time": 3.0,
}
BIAS = -8.35
# A turn of this many content words (stopwords aside) or more has full substance.
SUBSTANCE_WORDS = 8
# Kinds whose items are raw conversation, judged by their substance; others are distilled.
RAW_KINDS = frozenset({"message", "attachment"})
# The least a memory's age can multiply its score by (a new one gets 1.0).
RECENCY_FLOOR = 0.9
# Distilled memories carry more per word than raw conversation: a nudge, less than the gap
# between two neighbouring places, so it orders near-ties only.
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
_HAS_DIGIT = re.compile(r"\d")
_HAS_LETTER = re.compile(r"[^\W\d_]")


@dataclass(frozen=True)
class Ranked:
    """One item's place in each engine's list (1-based ranks; None: that engine did not find it)."""

    item_id: int
    lexical_rank: int | None
    lexical_score: float | None
    vector_rank: int | None
    vector_similarity: float | None


@dataclass(frozen=True)
class Features:
    """What the relevance of one candidate is computed from."""

    lexical_share: float  # its word match / the best word match of the query (0: no match)
    coverage: float  # the share of the query's words its own text holds (0: no word match)
    best_coverage: float  # the best coverage among the query's candidates: how much the words explain
    similarity: float  # cosine to the query (0 when it has no vector of the configured model)
    similarity_gap: float  # similarity - the best candidate's similarity (<= 0)
    substance: float  # min(content words, SUBSTANCE_WORDS) / SUBSTANCE_WORDS; 1.0 for distilled kinds
    speaker_named: bool  # the query names the item's speaker
    in_time: bool  # said within the time the query names
    holds_identifiers: bool = False  # its own text holds every identifier the query names (ordered first)

    def inputs(self) -> dict[str, float]:
        """The model's inputs, by WEIGHTS' names. The word match counts in proportion to how much of
        the query the best word match covers: when the words explain one word of five, the lexical
        ranking is weak evidence (a question sharing no word with its answer still shares a common
        one with many texts), when they explain all of it, strong."""
        return {
            "lexical": self.lexical_share * self.best_coverage,
            "similarity_gap": self.similarity_gap,
            "substance": self.substance,
            "speaker_named": float(self.speaker_named),
            "in_time": float(self.in_time),
        }

    def relevance(self, weights: Mapping[str, float] = WEIGHTS, bias: float = BIAS) -> float:
        """The model's relevance, between 0 and 1."""
        z = bias + sum(weights[name] * value for name, value in self.inputs().items())
        return 1.0 / (1.0 + math.exp(-z))


@dataclass(frozen=True)
class Scored:
    ranked: Ranked
    features: Features
    relevance: float
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


@dataclass(frozen=True)
class Words:
    """A text's words, lowercased, found once for each measure a search takes of it (a search
    weighs 4 candidates a result, each by its coverage, substance and identifiers)."""

    each: list[str]  # in order, repeats kept
    distinct: frozenset[str]
    ordered: list[str]  # the distinct ones, sorted: the words a stem begins are together

    @classmethod
    def of(cls, text: str) -> Words:
        each = _WORD.findall(text.lower())
        distinct = frozenset(each)
        return cls(each=each, distinct=distinct, ordered=sorted(distinct))

    def coverage(self, terms: Sequence[str]) -> float:
        """The share of the query's terms the text holds (stems, matched as snippets mark them)."""
        if not terms:
            return 0.0
        return sum(1 for stem in map(_stem, terms) if self._begins_a_word(stem)) / len(terms)

    def _begins_a_word(self, stem: str) -> bool:
        after = bisect.bisect_left(self.ordered, stem)
        return after < len(self.ordered) and self.ordered[after].startswith(stem)

    def substance(self, *, kind: str) -> float:
        """How much a piece of raw conversation holds: its content words, up to SUBSTANCE_WORDS."""
        if kind not in RAW_KINDS:
            return 1.0
        return min(sum(1 for word in self.each if word not in STOPWORDS), SUBSTANCE_WORDS) / SUBSTANCE_WORDS

    def holds_all(self, wanted: Sequence[str]) -> bool:
        """Whether the text holds each of `wanted` as a whole word (case aside); False for none wanted."""
        return bool(wanted) and all(term in self.distinct for term in wanted)


def coverage(text: str, terms: Sequence[str]) -> float:
    return Words.of(text).coverage(terms)


def substance(text: str, *, kind: str) -> float:
    return Words.of(text).substance(kind=kind)


def names_speaker(query: str, speaker: str) -> bool:
    """Whether the query names the speaker, as whole words ("Rosa" in "What did Rosa buy?")."""
    if not speaker.strip():
        return False
    return re.search(rf"(?<![^\W_]){re.escape(speaker.strip())}(?![^\W_])", query, re.IGNORECASE) is not None


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
    features: Features,
    kind: str,
    occurred_at: datetime,
    live: bool,
    now: datetime,
    half_life_days: float,
) -> Scored:
    relevance = features.relevance()
    recency = recency_factor(occurred_at, now, half_life_days)
    weight = KIND_WEIGHTS.get(kind, 1.0)
    return Scored(
        ranked=ranked,
        features=features,
        relevance=relevance,
        recency_factor=recency,
        kind_weight=weight,
        fused_score=relevance * recency * weight,
        live=live,
    )


def order(scored: Sequence[Scored]) -> list[Scored]:
    """Live items first, then those holding every identifier the query names, then by fused score
    (ties: the item written last first)."""
    return sorted(
        scored, key=lambda s: (not s.live, not s.features.holds_identifiers, -s.fused_score, -s.ranked.item_id)
    )


def identifiers(terms: Sequence[str]) -> list[str]:
    """The query words made of letters and digits both (error codes, tickets, commits, versioned
    names): at least 3 characters, so "v2" or "3d" stay ordinary words."""
    return [term for term in terms if len(term) >= 3 and _HAS_DIGIT.search(term) and _HAS_LETTER.search(term)]


def holds_all(text: str, wanted: Sequence[str]) -> bool:
    return Words.of(text).holds_all(wanted)


def _stem(term: str) -> str:
    for suffix in ("ations", "ation", "ings", "ing", "ies", "ied", "ed", "es", "ly", "s"):
        if term.endswith(suffix) and len(term) - len(suffix) >= 3:
            return term[: -len(suffix)]
    return term


# Markdown's marks, dropped from snippets: a snippet is read as plain text with its matches marked
# **word**, and a `**bold**` of the text itself would read as a match (and break the marks).
_MARKDOWN_MARKS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^ {0,3}(```|~~~).*$", re.MULTILINE), ""),  # code fences
    (re.compile(r"^ {0,3}\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$", re.MULTILINE), ""),  # table rule
    (re.compile(r"^ {0,3}(#{1,6}|>|[-*+]|\d{1,9}[.)])\s+", re.MULTILINE), ""),  # heading, quote, list marks
    (re.compile(r"!?\[([^\]\n]*)\]\([^)\s]*\)"), r"\1"),  # [text](url) and images: the text
    (re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1"), r"\2"),  # bold
    (re.compile(r"(?<![\w*])\*(?=[^\s*])(.+?)(?<=[^\s*])\*(?![\w*])"), r"\1"),  # italic
    (re.compile(r"`+([^`]*)`+"), r"\1"),  # code spans
    (re.compile(r"^[ \t]*\||\|[ \t]*$", re.MULTILINE), ""),  # a table row's outer pipes
    (re.compile(r"[ \t]*\|[ \t]*"), " · "),  # between its cells
    (re.compile(r"\s+"), " "),  # the lines of a snippet run on
)


def plain_text(text: str) -> str:
    """`text` without its Markdown marks, as a snippet shows it."""
    for pattern, replacement in _MARKDOWN_MARKS:
        text = pattern.sub(replacement, text)
    return text.strip()


def snippet(text: str, terms: Sequence[str], width: int = SNIPPET_CHARS) -> str:
    """A window of `text` (as plain text) around its first matching words, each match marked as **word**."""
    text = plain_text(text)
    stems = tuple(_stem(term) for term in terms)
    matches = [m for m in _WORD.finditer(text) if m.group().lower().startswith(stems)] if stems else []
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
