"""Offline relevance ranking: which candidate texts a query (and its conversation) is about.

The extractive backend's stand-in for an LLM's judgement where one is asked to pick among
texts (experience selection): BM25 over the candidates' words, scores normalised to 0..1.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

# How much of a `when` text's BM25 weight the query and context must cover to select it.
# Scores are normalised to 0..1 (see rank_by_relevance), so the threshold means the same with
# 3 candidates or 3,000: 0.2 is roughly "one distinctive term of a five-term `when` matches the
# query", which picks the intended experience in the tests without selecting on a shared word
# like "file" alone in a longer `when`.
DEFAULT_RELEVANCE_THRESHOLD = 0.2
CONTEXT_WEIGHT = 0.5  # a term seen only in the conversation counts half: the query is what is asked now
BM25_K1 = 1.2
BM25_B = 0.75

_WORD = re.compile(r"[^\W_]+")
_CAMEL_SPLIT = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
# English function words, plus the boilerplate of `when` texts ("use when the user asks ...")
# which would otherwise match every query.
STOPWORDS = frozenset(
    """a about above after again against all also am an and any are as at be because been before being
    below between both but by can could did do does doing done down during each few for from further had has
    have having he her here hers him his how i if in into is it its itself just let me more most my no nor
    not now of off on once only or other our ours out over own same she should so some such than that the
    their theirs them then there these they this those through to too under until up very was we were what
    when whenever where which while who whom why will with would you your yours use used using user users
    ask asks asked asking want wants need needs please apply applies relevant""".split()
)


def tokenize(text: str) -> list[str]:
    """Lowercase word stems without stopwords; `FileNotFoundError` and `read_csv` split into words."""
    tokens: list[str] = []
    for word in _WORD.findall(text):
        for part in _CAMEL_SPLIT.sub(" ", word).split():
            lowered = part.lower()
            if lowered not in STOPWORDS and len(lowered) > 1:
                tokens.append(_stem(lowered))
    return tokens


def _stem(word: str) -> str:
    # Enough to meet "files"/"file" and "plotting"/"plot" halfway; not a linguistic stemmer.
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 5 and word.endswith("ing"):
        return _undouble(word[:-3])
    if len(word) > 4 and word.endswith("ed"):
        return _undouble(word[:-2])
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def _undouble(stem: str) -> str:
    # "plotting" -> "plott" -> "plot", "logged" -> "logg" -> "log"; "fill"/"pass" keep theirs.
    if len(stem) > 2 and stem[-1] == stem[-2] and stem[-1] not in "aeioulsz":
        return stem[:-1]
    return stem


def relevance_scores(query: str, context: str, candidates: Sequence[tuple[str, str]]) -> dict[str, float]:
    """Each candidate's BM25 score for the query and context, divided by the score of its own terms.

    BM25 (k1=1.2, b=0.75, IDF over the candidates' `when` texts) weighs each `when` term by its
    rarity and frequency; dividing by the `when` text's score against itself makes it the share of
    the text's weight that the query (weight 1) and context (CONTEXT_WEIGHT) cover: 0 none, 1 all.
    """
    docs = [(exp_id, Counter(tokenize(when))) for exp_id, when in candidates]
    if not docs:
        return {}
    query_terms = set(tokenize(query))
    context_terms = set(tokenize(context)) - query_terms
    total = len(docs)
    average_length = sum(sum(terms.values()) for _, terms in docs) / total or 1.0
    frequency: Counter[str] = Counter()
    for _, terms in docs:
        frequency.update(terms.keys())
    scores: dict[str, float] = {}
    for exp_id, terms in docs:
        length = sum(terms.values())
        norm = BM25_K1 * (1 - BM25_B + BM25_B * length / average_length)
        own = matched = 0.0
        for term, count in terms.items():
            idf = math.log(1 + (total - frequency[term] + 0.5) / (frequency[term] + 0.5))
            weight = idf * count * (BM25_K1 + 1) / (count + norm)
            own += weight
            if term in query_terms:
                matched += weight
            elif term in context_terms:
                matched += CONTEXT_WEIGHT * weight
        scores[exp_id] = matched / own if own else 0.0
    return scores


def rank_by_relevance(
    query: str,
    context: str,
    candidates: Sequence[tuple[str, str]],
    *,
    threshold: float = DEFAULT_RELEVANCE_THRESHOLD,
) -> list[str]:
    """The ids whose `when` the query and context cover at least `threshold` (0..1), best first.

    Candidates are (exp_id, when). Ties keep candidate order. A score of 0 is never selected, so
    threshold 0 means "anything that shares a term".
    """
    scores = relevance_scores(query, context, candidates)
    position = {exp_id: index for index, (exp_id, _) in enumerate(candidates)}
    chosen = [exp_id for exp_id, score in scores.items() if score > 0 and score >= threshold]
    return sorted(chosen, key=lambda exp_id: (-scores[exp_id], position[exp_id]))
