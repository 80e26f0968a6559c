"""The quality set of bench/search_bench.py: planted memories, questions about them, and the
realistic distractor texts they are hidden among. Pure: no Django, no model.

The 40 memories and 60 questions are bench/embedding_choice.py's (20 reworded with synonyms, 20
with the same words in another order, 20 that share no keyword with their memory). Distractors:
chunks (as the indexer cuts them, ~1,000 characters) of the seeded coding-agent sessions of
bench/retention_sessions.py (tool calls, file contents, logs, tickets, decisions), plus three
near misses per memory: sentences that reuse two of its content words about something else, so
a question's keywords also match items that do not answer it, as in a real team's history.
"""

from __future__ import annotations

import random
import re

from bench.embedding_choice import GROUPS, MEMORIES, keywords
from bench.retention_sessions import generate, message_text
from memory_app.search.text import chunks  # the indexer's own cut (no Django needed)

NEAR_MISS_TEMPLATES = (
    "Reminder: the {a} notes from the {b} retro are in the wiki, please add yours.",
    "Can someone review my PR that renames {a} to something clearer? It touches the {b} module too.",
    "The {a} dashboard widget now shows {b} numbers per region.",
    "I moved the {a} meeting to Thursday; bring your questions about {b}.",
    "Docs: added a section on {a} and a glossary entry for {b}.",
    "Lunch and learn next week: a short talk on {a}, then open questions on {b}.",
    "Typo fixed in the {a} onboarding guide (the part about {b}).",
    "Survey results: people want clearer docs on {a} and fewer pings about {b}.",
)


def session_chunks(count: int, seed: int = 11) -> list[str]:
    """`count` indexed pieces of realistic agent sessions (every message of a session, chunked)."""
    out: list[str] = []
    session = 0
    while len(out) < count:
        generated = generate(seed + session, 400)
        for message in generated.messages:
            out += chunks(message_text(message))
        session += 1
    return out[:count]


def near_misses(seed: int = 5) -> list[str]:
    """Three sentences per memory with two of its words, preferring the words its questions use."""
    rng = random.Random(seed)
    asked: dict[int, set[str]] = {}
    for questions in GROUPS.values():
        for question, answer in questions:
            asked.setdefault(answer, set()).update(keywords(question))
    out: list[str] = []
    for index, memory in enumerate(MEMORIES):
        words = list(dict.fromkeys(w for w in re.findall(r"[A-Za-z][A-Za-z0-9]+", memory) if len(w) >= 4))
        words = [w for w in words if keywords(w)]  # not a stopword
        shared = [w for w in words if keywords(w) & asked.get(index, set())]
        pool = shared if len(shared) >= 2 else words
        for template in rng.sample(NEAR_MISS_TEMPLATES, 3):
            a, b = rng.sample(pool, 2)
            out.append(template.format(a=a, b=b))
    return out


def distractors(count: int) -> list[str]:
    misses = near_misses()
    return misses + session_chunks(max(count - len(misses), 0))


QUESTIONS: list[tuple[str, str, int]] = [
    (group, question, answer) for group, questions in GROUPS.items() for question, answer in questions
]
