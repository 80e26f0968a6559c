"""The planted set of bench/embedding_choice.py and bench/search_bench.py: memories, questions about
them, and the realistic distractor texts they are hidden among. Pure: no Django, no model.

40 memories of an engineering team (bugs, decisions, people facts) and 60 questions about them:
20 reworded with synonyms, 20 with the same words in another order, 20 that share no keyword with
their memory (`check_planted_set` proves it). Distractors (search_bench only):
chunks (as the indexer cuts them, ~1,000 characters) of the seeded coding-agent sessions of
bench/retention_sessions.py (tool calls, file contents, logs, tickets, decisions), plus three
near misses per memory: sentences that reuse two of its content words about something else, so
a question's keywords also match items that do not answer it, as in a real team's history.
"""

from __future__ import annotations

import random
import re
from typing import Any

from bench.retention_sessions import generate, message_text
from memory_app.search.text import chunks  # the indexer's own cut (no Django needed)

MEMORIES: list[str] = [
    "The login page returns a 500 error when the password contains an emoji.",
    "We decided to move the primary database from MySQL to PostgreSQL 16 in March.",
    "Priya is the on-call engineer for the payments service this week.",
    "The nightly backup job failed because the S3 bucket ran out of quota.",
    "Tom prefers code reviews in the morning and is off on Fridays.",
    "Memory leak in the image resizing worker: it never closes the PIL file handles.",
    "We chose Celery over RQ for background jobs because we need retries with backoff.",
    "The iOS app crashes on startup for users on iOS 15 after the 3.2 release.",
    "Sara leads the frontend team and owns the design system.",
    "The API rate limit for free accounts is 60 requests per minute.",
    "The flaky integration test test_checkout_flow times out on CI when Redis is slow.",
    "Deployments are frozen from December 20 until January 3.",
    "Marco speaks Italian and Spanish and handles the European customers.",
    "The search index is rebuilt every night at 2 am UTC.",
    "We dropped support for Python 3.8 in version 4.0.",
    "Customer invoices showed the wrong currency symbol for Swiss francs.",
    "Kubernetes cluster autoscaling is capped at 40 nodes to control cost.",
    "Lena is allergic to peanuts; order the team lunch accordingly.",
    "Webhook retries use exponential backoff for up to 24 hours.",
    "Timezone bug: scheduled reports were sent an hour early after daylight saving changed.",
    "We use feature flags from LaunchDarkly for gradual rollouts.",
    "The CSV export truncates rows longer than 32,000 characters.",
    "Ahmed joined in May as a site reliability engineer, coming from Google.",
    "Passwords are hashed with Argon2id; bcrypt was retired last year.",
    "The mobile team ships a release every two weeks on Tuesday.",
    "Staging database credentials rotate automatically every 30 days.",
    "The dashboard loads slowly because the activity query has no index on created_at.",
    "We picked Grafana and Prometheus for monitoring instead of Datadog to save money.",
    "Julia is on parental leave until September.",
    "Emails to Outlook addresses land in spam since the DKIM key expired.",
    "The public API is versioned in the URL path, currently v2.",
    "File uploads larger than 100 MB fail with a gateway timeout.",
    "Kenji wrote the original billing code and knows its quirks.",
    "Dark mode is the most requested feature in the customer survey.",
    "A race condition lets two workers charge the same order twice.",
    "Code needs two approvals before merging into main.",
    "The VPN certificate expires on 1 July and must be renewed.",
    "Our largest customer, Acme Corp, renews their contract in November.",
    "The recommendation model is retrained weekly on Sunday night.",
    "Logs are kept for 14 days and then deleted for GDPR compliance.",
]

# (question, index of the memory that answers it)
SYNONYM_QUESTIONS: list[tuple[str, int]] = [
    ("Why does sign-in fail with a server error when the passphrase has an emoji?", 0),
    ("When did we migrate the main database to Postgres?", 1),
    ("Why did the overnight backup fail?", 3),
    ("Why did we pick Celery for async tasks?", 6),
    ("Which release made the iPhone app crash at launch?", 7),
    ("How many calls per minute can a free plan make to the API?", 9),
    ("Which CI test is unreliable and keeps timing out?", 10),
    ("When is the search index regenerated?", 13),
    ("Which bills displayed an incorrect currency sign for CHF?", 15),
    ("How long do webhook delivery attempts keep going?", 18),
    ("Does the CSV download cut off long rows?", 21),
    ("Which hashing algorithm protects user passwords?", 23),
    ("Why is the dashboard so slow to open?", 26),
    ("Why do messages to Outlook end up in the junk folder?", 29),
    ("Why do big uploads over 100 MB time out?", 31),
    ("Can a customer be billed twice for one order because of concurrency?", 34),
    ("How many reviewers must approve a pull request before it is merged?", 35),
    ("How often is the recommendation model retrained?", 38),
    ("How long do we retain logs?", 39),
    ("What is the maximum node count for cluster autoscaling?", 16),
]
WORD_ORDER_QUESTIONS: list[tuple[str, int]] = [
    ("This week, who is on call for payments?", 2),
    ("On Fridays, is Tom off? And when does he prefer code reviews?", 4),
    ("Which worker leaks memory when resizing images?", 5),
    ("The design system and the frontend team: who owns them?", 8),
    ("Until when are deployments frozen in December?", 11),
    ("European customers: who handles them, and which languages does he speak?", 12),
    ("In which version was support for Python 3.8 dropped?", 14),
    ("Who on the team is allergic to peanuts?", 17),
    ("After daylight saving changed, what happened to the scheduled reports?", 19),
    ("For gradual rollouts, which feature flags do we use?", 20),
    ("Which site reliability engineer, coming from Google, joined in May?", 22),
    ("On which day does the mobile team ship a release?", 24),
    ("Every how many days do staging database credentials rotate?", 25),
    ("Instead of Datadog, what did we pick for monitoring?", 27),
    ("Until September, who is on parental leave?", 28),
    ("In the URL path, which version of the public API is current?", 30),
    ("Who knows the quirks of the original billing code?", 32),
    ("In the customer survey, which feature is the most requested?", 33),
    ("When must the VPN certificate be renewed?", 36),
    ("In which month does Acme Corp renew their contract?", 37),
]
NO_KEYWORD_QUESTIONS: list[tuple[str, int]] = [
    ("Why can't people sign in if their secret phrase includes a smiley?", 0),
    ("Which relational engine are we switching our storage to?", 1),
    ("Whom should I page if checkout charging breaks right now?", 2),
    ("Why is yesterday's data snapshot missing?", 3),
    ("Which colleague doesn't work at the end of the week?", 4),
    ("What makes the thumbnail service gradually consume all its RAM?", 5),
    ("Why does the iPhone application die immediately when opened on older phones?", 7),
    ("Who is in charge of the UI component library?", 8),
    ("How much traffic can a non-paying user send us?", 9),
    ("Who talks to our clients in Madrid and Rome?", 12),
    ("Why were bills for Zurich clients printed with the dollar sign?", 15),
    ("Is there any food restriction to keep in mind when catering for the group?", 17),
    ("Why did the automatic summaries go out sixty minutes too soon in spring?", 19),
    ("Who is our newest ops hire and where did they work before?", 22),
    ("What makes the home screen sluggish?", 26),
    ("Which colleague is away caring for a newborn?", 28),
    ("Why do our newsletters go to junk for Microsoft mail users?", 29),
    ("Can a concurrency problem make a shopper pay double?", 34),
    ("Can I push to production over the holidays?", 11),
    ("How long do we hold on to server output before erasing it?", 39),
]
GROUPS = {"synonyms": SYNONYM_QUESTIONS, "word order": WORD_ORDER_QUESTIONS, "no keyword": NO_KEYWORD_QUESTIONS}

STOPWORDS = frozenset(
    """a an and are as at be because before by can do does did for from has have he her his how i if in
    is it its keep let me must my not of off on or our the their them there they this to up us was we
    what when where which who whom why will with you your after all any into over so than then too""".split()
)


def keywords(text: str) -> set[str]:
    """Crude stems of the content words: enough to prove a "no keyword" question shares none."""
    stems = set()
    for word in re.findall(r"[a-z0-9]+", text.lower()):
        if word in STOPWORDS:
            continue
        for suffix in ("ing", "ed", "es", "s", "ly"):
            if word.endswith(suffix) and len(word) - len(suffix) >= 3:
                word = word[: -len(suffix)]
                break
        stems.add(word)
    return stems


def check_planted_set() -> None:
    for question, index in NO_KEYWORD_QUESTIONS:
        shared = keywords(question) & keywords(MEMORIES[index])
        if shared:
            raise SystemExit(f"'no keyword' question shares {sorted(shared)} with its memory: {question!r}")


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


# The quality set in the recall evaluation's file format (memory_app/search/evalset.py), for
# `python -m bench recall_fit`: the memories and distractors as turns of one speaker, in sessions of
# SESSION_TURNS, each question's evidence its memory. The evaluation's categories are those of
# conversations; a question's group is the first part of its id ("no keyword/3").
SESSION_TURNS = 250
QUALITY_SPEAKER = "Agent"


def as_evalset(distractor_count: int = 3000) -> dict[str, Any]:
    texts = [(f"m{index}", text) for index, text in enumerate(MEMORIES)]
    texts += [(f"d{index}", text) for index, text in enumerate(distractors(distractor_count))]
    sessions = [
        {
            "id": f"s{number}",
            "date": "2026-11-01T12:00",
            "turns": [
                {"id": turn_id, "speaker": QUALITY_SPEAKER, "text": text}
                for turn_id, text in texts[start : start + SESSION_TURNS]
            ],
        }
        for number, start in enumerate(range(0, len(texts), SESSION_TURNS))
    ]
    questions = [
        {"id": f"{group}/{number}", "question": question, "evidence": [f"m{answer}"], "category": "single-hop"}
        for number, (group, question, answer) in enumerate(QUESTIONS)
    ]
    return {
        "conversations": [
            {"id": "planted", "speakers": [QUALITY_SPEAKER], "sessions": sessions, "questions": questions}
        ]
    }
