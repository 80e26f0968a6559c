"""Synthetic search items for bench/search_bench.py. Pure: numpy and the standard library, no Django.

Team sizes: 100 teams whose sizes follow a Zipf-Mandelbrot law, size(k) = C / (k + q)^s, with
s and q fitted so that the largest team holds 20 % of the items and the smallest 1/200 of the
largest (at full scale: 1M items, 200k in the largest team, 1k in the smallest).

Text: each team talks about a few topics. An item is 6-160 words: about a quarter drawn from
its topic's 25 words, the rest from a Zipf (s = 1.05) distribution over the whole vocabulary,
whose head is ~330 common English words (stopwords included, as in real messages) and whose tail
is 30k pronounceable made-up words (names, identifiers, jargon). So a query's words match a few
items (its rare words) or thousands (its common ones), as in a real team's history.

Vectors: 384 dimensions, float32, L2-normalised; one random centre per topic, and each item is
its topic's centre plus isotropic noise (cosine to the centre ~0.55), so a query near a centre has
a few hundred close neighbours in a team and the HNSW graph has clusters to navigate, as with a
real model. Queries: 2-4 of a topic's words and one common word, with a vector near the topic's
centre (cosine ~0.7 to it).

No real model is run here: that would take hours for 1M items on two cores; its throughput is
measured separately (search_bench's embedding section), and its quality on real text too.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

DIMENSION = 384
TEAMS = 100
FULL_SCALE_ITEMS = 1_000_000
LARGEST_SHARE = 0.2
SMALLEST_OF_LARGEST = 1 / 200
TOPICS = 400  # topics of the whole corpus; each team uses a handful
TOPIC_WORDS = 25
TAIL_WORDS = 30_000
WORD_ZIPF = 1.05
ITEM_NOISE = 1.5  # noise norm relative to the unit centre: cosine(item, centre) ~ 1/sqrt(1 + 1.5^2) = 0.55
QUERY_NOISE = 1.0  # cosine(query, centre) ~ 0.71

# The head of the vocabulary, most frequent first (roughly as in an engineering team's messages).
HEAD_WORDS = """
the to a and of is in it for that we on this be with i you not as are have was at but can so do if or
from will by an my there what just all about they one should need use would think also then out up now
when some more get like which time how work here know no test data error file run see any new because
our make only could did been code check other still want fix after first change issue server user
before same where back does update message build into look release service version today way case
config team call set log value their them than point next database query add job config api request
week need working problem deploy tests branch review job failed customer process question sure
thing maybe good yes well note list page table model report name start end field line output input
return type function class method default path key cache index worker queue task event retry timeout
limit memory disk network latency request response status client session token user account order
payment invoice billing price plan email notification alert metric dashboard graph chart monitor
backup restore migration schema column row record entry item batch stream topic partition offset
commit merge push pull deploy rollback staging production cluster node pod container image docker
kubernetes terraform ansible script command shell terminal flag option setting environment variable
secret password certificate domain dns proxy gateway load balancer traffic rate quota budget cost
meeting call sync standup sprint ticket story epic bug feature design spec doc wiki note summary
decision plan goal risk owner lead manager engineer developer designer support sales marketing legal
monday tuesday wednesday thursday friday weekend morning afternoon evening tonight tomorrow yesterday
january february march april may june july august september october november december quarter year
slow fast broken flaky stable old new large small empty full missing wrong correct late early
""".split()


def team_sizes(scale: float) -> list[int]:
    """The 100 teams' item counts, largest first, for `scale` x 1M items."""
    ranks = np.arange(1, TEAMS + 1, dtype=np.float64)
    target = FULL_SCALE_ITEMS * scale
    largest = target * LARGEST_SHARE

    def shape(q: float) -> np.ndarray:
        exponent = math.log(1 / SMALLEST_OF_LARGEST) / math.log((TEAMS + q) / (1 + q))
        return largest * ((1 + q) / (ranks + q)) ** exponent

    low, high = 0.0, 10.0  # the total grows with q: find the q whose total is the target
    for _ in range(60):
        middle = (low + high) / 2
        low, high = (middle, high) if shape(middle).sum() < target else (low, middle)
    return [max(1, round(size)) for size in shape(low)]


def _made_up_words(count: int, rng: np.random.Generator) -> list[str]:
    onsets = "b c d f g h j k l m n p r s t v w z br ch cl dr fl gr kr pl pr sh st tr th".split()
    vowels = "a e i o u ai ea ia io ou".split()
    codas = ["", "", "n", "r", "s", "l", "x", "k", "th", "nd", "rt"]
    words: list[str] = []
    seen = set(HEAD_WORDS)
    while len(words) < count:
        syllables = int(rng.integers(2, 4))
        word = (
            "".join(onsets[rng.integers(len(onsets))] + vowels[rng.integers(len(vowels))] for _ in range(syllables))
            + codas[rng.integers(len(codas))]
        )
        if word not in seen:
            seen.add(word)
            words.append(word)
    return words


@dataclass(frozen=True)
class Vocabulary:
    words: list[str]
    probabilities: np.ndarray  # Zipf over `words`, in order
    topic_words: np.ndarray  # (TOPICS, TOPIC_WORDS) indices into `words`
    centres: np.ndarray  # (TOPICS, DIMENSION), unit rows


def vocabulary(seed: int = 7) -> Vocabulary:
    rng = np.random.default_rng(seed)
    words = list(dict.fromkeys(HEAD_WORDS)) + _made_up_words(TAIL_WORDS, rng)
    weights = 1.0 / np.arange(1, len(words) + 1) ** WORD_ZIPF
    # A topic's words are mid-frequency: not "the", not a word used once in a million items.
    topic_words = rng.integers(150, 12_000, size=(TOPICS, TOPIC_WORDS))
    centres = rng.standard_normal((TOPICS, DIMENSION)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    return Vocabulary(words=words, probabilities=weights / weights.sum(), topic_words=topic_words, centres=centres)


@dataclass(frozen=True)
class TeamItems:
    texts: list[str]
    vectors: np.ndarray  # (n, DIMENSION) float32, unit rows
    topics: np.ndarray  # (n,) topic of each item
    age_seconds: np.ndarray  # (n,) how long ago each item was written (0 .. 180 days)


def team_topics(team_index: int, vocab: Vocabulary) -> np.ndarray:
    rng = np.random.default_rng(10_000 + team_index)
    return rng.choice(TOPICS, size=int(rng.integers(4, 13)), replace=False)


def team_items(team_index: int, size: int, vocab: Vocabulary, *, start: int = 0) -> TeamItems:
    """Items `start` .. `start + size` of team `team_index` (deterministic: the same team and
    range always give the same items, so the bench can regenerate a team's vectors to check)."""
    rng = np.random.default_rng([team_index, start, size])
    topics_of_team = team_topics(team_index, vocab)
    topics = topics_of_team[rng.integers(len(topics_of_team), size=size)]
    lengths = np.clip(rng.lognormal(mean=3.4, sigma=0.7, size=size), 6, 160).astype(np.int64)
    total = int(lengths.sum())
    background = rng.choice(len(vocab.words), size=total, p=vocab.probabilities)
    from_topic = rng.random(total) < 0.25
    owner = np.repeat(np.arange(size), lengths)
    topical = vocab.topic_words[topics[owner], rng.integers(TOPIC_WORDS, size=total)]
    chosen = np.where(from_topic, topical, background)
    words = vocab.words
    bounds = np.concatenate([[0], np.cumsum(lengths)])
    texts = [" ".join(words[w] for w in chosen[bounds[i] : bounds[i + 1]]) for i in range(size)]
    noise = rng.standard_normal((size, DIMENSION)).astype(np.float32)
    noise *= ITEM_NOISE / math.sqrt(DIMENSION)
    vectors = vocab.centres[topics] + noise
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    age = rng.uniform(0, 180 * 86400, size=size)
    return TeamItems(texts=texts, vectors=vectors.astype(np.float32), topics=topics, age_seconds=age)


def team_chunks(team_index: int, size: int, vocab: Vocabulary, chunk: int = 20_000) -> Iterator[TeamItems]:
    """A team's items in pieces of `chunk`, so the largest team never sits in memory as text."""
    for start in range(0, size, chunk):
        yield team_items(team_index, min(chunk, size - start), vocab, start=start)


@dataclass(frozen=True)
class Query:
    text: str
    vector: np.ndarray


def queries(team_index: int, count: int, vocab: Vocabulary, seed: int = 0) -> list[Query]:
    """Questions a team might ask: 2-4 words of one of its topics and one common word."""
    rng = np.random.default_rng([team_index, 99, seed])
    topics_of_team = team_topics(team_index, vocab)
    out: list[Query] = []
    for _ in range(count):
        topic = int(topics_of_team[rng.integers(len(topics_of_team))])
        picked = rng.choice(vocab.topic_words[topic], size=int(rng.integers(2, 5)), replace=False)
        common = vocab.words[int(rng.integers(60, 330))]
        words = [vocab.words[int(w)] for w in picked] + [common]
        order = rng.permutation(len(words))
        noise = rng.standard_normal(DIMENSION).astype(np.float32) * (QUERY_NOISE / math.sqrt(DIMENSION))
        vector = vocab.centres[topic] + noise
        out.append(Query(text=" ".join(words[i] for i in order), vector=(vector / np.linalg.norm(vector))))
    return out


def text_hash(text: str) -> str:
    """As memory_app.search.documents.Doc.text_hash."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


# --- the query embedder of the latency runs ----------------------------------------------------

SYNTHETIC_MODEL = "bench-synthetic-384"
QUERY_VECTORS: dict[str, np.ndarray] = {}  # query text -> its synthetic vector, filled by the bench


class SyntheticQueryEmbeddings:
    """EMBEDDINGS_BACKEND of the latency runs: a query's vector is its synthetic one (so it is
    comparable with the seeded items'), but every call first embeds the query with the real
    offline model and throws the result away, so a hybrid search pays the real model's cost."""

    name = "bench"
    model = SYNTHETIC_MODEL
    dimension = DIMENSION

    def embed(self, texts: list[str], *, purpose: str) -> np.ndarray:
        from memory_app.search.embeddings import OFFLINE_BACKEND, get_embedder

        get_embedder(OFFLINE_BACKEND).embed(texts, purpose="query")
        return np.stack([query_vector(text) for text in texts])


def query_vector(text: str) -> np.ndarray:
    """The synthetic vector of a bench query; the search embeds a query without the time it names
    ("... last week"), so a text may be a query with some of its words left out."""
    if text in QUERY_VECTORS:
        return QUERY_VECTORS[text]
    words = set(text.split())
    return next(vector for query, vector in QUERY_VECTORS.items() if words <= set(query.split()))
