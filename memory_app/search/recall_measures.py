"""What a ranking of turns scores against a question's evidence, and the textbook BM25 ranking
memsite's is compared with (pure functions, no Django).

The measures, for one question with evidence turns E and a ranking (best first, each turn once):
- R@k, evidence recall: the share of E in the first k places (a list question whose three
  answers sit in three turns scores 1/3 per turn found);
- hit@k: 1 if any turn of E is in the first k places, else 0;
- NDCG@k with binary relevance: DCG = sum over places i <= k holding a turn of E of 1/log2(i + 1),
  divided by the DCG of the ideal ranking (all of E first, at most k of them).
A set's figure is the mean over its questions.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

K_VALUES = (1, 5, 10)
NDCG_K = 10
FIGURE_NAMES = (*(f"R@{k}" for k in K_VALUES), *(f"hit@{k}" for k in K_VALUES), f"NDCG@{NDCG_K}")

# Okapi BM25's usual constants (Robertson & Zaragoza, 2009): k1 saturates a word's repeats, b
# normalises by length.
BM25_K1 = 1.2
BM25_B = 0.75
# A small list on purpose: the baseline is the plain textbook one, not a tuned engine.
BM25_STOPWORDS = frozenset(
    """a an and are as at be but by did do does for from had has have he her his i in is it its me my of on or our
    she so that the their them they this to was we were what when where which who why will with you your""".split()
)
_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def evidence_recall(*, ranking: Sequence[str], evidence: Collection[str], k: int) -> float:
    found = set(ranking[:k]) & set(evidence)
    return len(found) / len(evidence) if evidence else 0.0


def evidence_hit(*, ranking: Sequence[str], evidence: Collection[str], k: int) -> float:
    return 1.0 if set(ranking[:k]) & set(evidence) else 0.0


def ndcg(*, ranking: Sequence[str], evidence: Collection[str], k: int = NDCG_K) -> float:
    wanted = set(evidence)
    gained = sum(1.0 / math.log2(place + 1) for place, turn in enumerate(ranking[:k], start=1) if turn in wanted)
    ideal = sum(1.0 / math.log2(place + 1) for place in range(1, min(len(wanted), k) + 1))
    return gained / ideal if ideal else 0.0


def question_figures(*, ranking: Sequence[str], evidence: Collection[str]) -> dict[str, float]:
    """Every figure of one question (FIGURE_NAMES), from its ranking of distinct turn ids."""
    figures = {f"R@{k}": evidence_recall(ranking=ranking, evidence=evidence, k=k) for k in K_VALUES}
    figures |= {f"hit@{k}": evidence_hit(ranking=ranking, evidence=evidence, k=k) for k in K_VALUES}
    figures[f"NDCG@{NDCG_K}"] = ndcg(ranking=ranking, evidence=evidence, k=NDCG_K)
    return figures


def mean_figures(figures: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """The mean of each figure over the questions (0 for none)."""
    return {name: sum(f[name] for f in figures) / len(figures) if figures else 0.0 for name in FIGURE_NAMES}


def bm25_tokens(text: str) -> list[str]:
    """Lower-cased word tokens without BM25_STOPWORDS (no stemming: the textbook baseline)."""
    return [word for word in _WORD.findall(text.lower()) if word not in BM25_STOPWORDS]


@dataclass(frozen=True)
class Bm25Index:
    """Okapi BM25 over a fixed list of documents (id, text).

    score(D, Q) = sum over the distinct terms q of Q found in D of
        idf(q) * tf(q, D) * (k1 + 1) / (tf(q, D) + k1 * (1 - b + b * |D| / avgdl))
    with idf(q) = ln(1 + (N - n(q) + 0.5) / (n(q) + 0.5)), the form Lucene uses: it never goes
    negative, so a word in most documents still counts a little rather than against them.
    """

    ids: tuple[str, ...]
    term_counts: tuple[Counter[str], ...]
    lengths: tuple[int, ...]
    document_frequency: Mapping[str, int]
    average_length: float
    k1: float = BM25_K1
    b: float = BM25_B

    @classmethod
    def build(cls, documents: Sequence[tuple[str, str]], *, k1: float = BM25_K1, b: float = BM25_B) -> Bm25Index:
        counts = tuple(Counter(bm25_tokens(text)) for _, text in documents)
        lengths = tuple(sum(count.values()) for count in counts)
        frequency: Counter[str] = Counter()
        for count in counts:
            frequency.update(count.keys())
        return cls(
            ids=tuple(doc_id for doc_id, _ in documents),
            term_counts=counts,
            lengths=lengths,
            document_frequency=dict(frequency),
            average_length=(sum(lengths) / len(lengths)) if lengths and sum(lengths) else 1.0,
            k1=k1,
            b=b,
        )

    def idf(self, term: str) -> float:
        found_in = self.document_frequency.get(term, 0)
        return math.log(1.0 + (len(self.ids) - found_in + 0.5) / (found_in + 0.5))

    def score(self, terms: Collection[str], position: int) -> float:
        counts, length = self.term_counts[position], self.lengths[position]
        norm = self.k1 * (1.0 - self.b + self.b * length / self.average_length)
        return sum(
            self.idf(term) * counts[term] * (self.k1 + 1.0) / (counts[term] + norm) for term in terms if counts[term]
        )

    def rank(self, query: str, *, limit: int) -> list[str]:
        """The ids of the `limit` best documents sharing a word with the query; ties keep document order."""
        terms = set(bm25_tokens(query))
        scored = [(self.score(terms, position), position) for position in range(len(self.ids))]
        best = sorted((pair for pair in scored if pair[0] > 0), key=lambda pair: (-pair[0], pair[1]))
        return [self.ids[position] for _, position in best[:limit]]
