"""Measuring recall on labelled conversations (`manage.py recall_eval`): each conversation is
loaded into a team of its own through the services the API calls, indexed to completion, and
asked every question through the search the API's POST /api/v1/search/ serves; beside it, two
baselines over exactly the same turns: the textbook BM25 of `recall_measures` and the configured
embedding backend's vectors alone (exact cosine over every turn).

The teams are real teams: a run deletes them at the end unless asked to keep them (to look at
the loaded sessions in the dashboard, or search them by hand).
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypedDict

import numpy as np
from django.conf import settings
from django.db import connection
from django.test.utils import override_settings

from memory_app import jobs
from memory_app.conversations import services as conversations
from memory_app.jobs import JobKind
from memory_app.search import engines, selectors
from memory_app.search import services as search_index
from memory_app.search.embeddings import get_embedder
from memory_app.search.evalset import CATEGORIES, Conversation, EvalSet, message_content, session_time
from memory_app.search.models import IndexRun, SearchItem, SearchKind
from memory_app.search.recall_measures import Bm25Index, mean_figures, question_figures
from memory_app.tenancy import services as tenancy
from memory_app.tenancy.models import Team

SYSTEMS = ("memsite", "bm25", "dense")
TOP_K = 10  # results asked for per question: the deepest figure is R@10 / NDCG@10
OVERALL = "overall"
TEAM_PREFIX = "recall-eval"
WAIT_FOR_WORKER_SECONDS = 0.2
# Every speaker is a person, not a model: they all write as "user", told apart by `name`.
TURN_ROLE = "user"


class RecallEvalError(Exception):
    """The evaluation could not run to the end (an index that did not settle, a failed embedding)."""


class Setup(TypedDict):
    database: str
    lexical_engine: str
    vector_engine: str
    embedding_model: str
    top_k: int
    dated: bool  # whether each turn was loaded with its session's time


class Timings(TypedDict):
    load_seconds: float
    index_seconds: float
    search_seconds: dict[str, float]  # per system, every question of every conversation
    total_seconds: float


class QuestionResult(TypedDict):
    conversation: str
    id: str
    category: str
    question: str
    evidence: list[str]
    rankings: dict[str, list[str]]  # system -> turn ids, best first


class EvalReport(TypedDict):
    file: str
    systems: list[str]
    conversations: int
    sessions: int
    turns: int
    questions: dict[str, int]  # per category, and "overall"
    setup: Setup
    timings: Timings
    figures: dict[str, dict[str, dict[str, float]]]  # system -> category or "overall" -> figure -> mean
    warnings: list[str]
    teams: list[str]  # the teams the conversations were loaded into (deleted at the end unless kept)
    results: list[QuestionResult]


@dataclass
class _Clock:
    load: float = 0.0
    index: float = 0.0
    search: dict[str, float] = field(default_factory=dict)

    def add_search(self, system: str, seconds: float) -> None:
        self.search[system] = self.search.get(system, 0.0) + seconds


class IndexedHereDispatcher:
    """The job dispatcher while a set loads: sends nothing, since the evaluation runs the team's
    index jobs itself, in this process, to completion (no worker or broker needed, none disturbed)."""

    def send(self, kind: JobKind, job_id: Any, countdown: float) -> None:
        return None


@contextmanager
def jobs_run_here() -> Iterator[None]:
    dispatcher = f"{IndexedHereDispatcher.__module__}.{IndexedHereDispatcher.__qualname__}"
    # A delay to gather writes would only make the runs wait: they are run at once here.
    with override_settings(JOB_DISPATCHER=dispatcher, SEARCH_INDEX_DELAY=0.0):
        yield


@dataclass(frozen=True)
class LoadedConversation:
    team: Team
    turn_of_message: dict[uuid.UUID, str]  # message id -> the turn it holds


def conversation_load(*, conversation: Conversation, team: Team, dated: bool = True) -> LoadedConversation:
    """The conversation in a fresh team: one session per dated session (its date and ids in the
    session's metadata), one message per turn, appended as the API appends them, said at the
    session's date (UTC when the date has no offset), so search's time filters see the evalset's time.
    Not `dated`: the turns carry no time of their own (as an importer that keeps dates only in
    metadata leaves them), to measure what the dates are worth."""
    turn_of_message: dict[uuid.UUID, str] = {}
    for session_data in conversation["sessions"]:
        session = conversations.session_create(
            team=team,
            external_id=f"{conversation['id']}/{session_data['id']}"[:255],
            metadata={"conversation": conversation["id"], "session": session_data["id"], "date": session_data["date"]},
        )
        said_at = {"occurred_at": session_time(session_data["date"])} if dated else {}
        messages = [
            {"role": TURN_ROLE, "name": turn["speaker"], "content": message_content(turn), **said_at}
            for turn in session_data["turns"]
        ]
        appended = conversations.message_append(session=session, messages=messages)
        for message, turn in zip(appended.messages, session_data["turns"], strict=True):
            turn_of_message[message.pk] = turn["id"]
    return LoadedConversation(team=team, turn_of_message=turn_of_message)


def index_until_done(*, team_id: int) -> None:
    """Run the team's index jobs here until every message and item is embedded (as `reindex --now`
    does). A worker may hold a run of the team meanwhile (the sweeper wakes teams with a backlog, and
    this command sends nothing): then it waits for that run to end."""
    deadline = time.monotonic() + settings.SEARCH_RUNNING_DEADLINE
    while time.monotonic() < deadline:
        runs = IndexRun.objects.filter(team_id=team_id)
        run = runs.filter(status=IndexRun.Status.PENDING).order_by("queued_at").first()
        if run is not None:
            outcome = search_index.search_index_execute(run_id=str(run.pk))
            if outcome == jobs.ALREADY_CLAIMED:  # a worker took it first, or it is not due yet
                time.sleep(WAIT_FOR_WORKER_SECONDS)
            elif outcome != "done":
                run.refresh_from_db()
                raise RecallEvalError(f"the index run of team {team_id} ended {outcome!r}: {run.error or 'no error'}")
        elif runs.filter(status=IndexRun.Status.RUNNING).exists():
            time.sleep(WAIT_FOR_WORKER_SECONDS)
        elif search_index.has_backlog(team_id):
            search_index.index_request(team_id=team_id)  # a run, whether or not an append woke one
        else:
            return
    raise RecallEvalError(f"the index of team {team_id} was not done after {settings.SEARCH_RUNNING_DEADLINE} s")


def memsite_ranking(*, loaded: LoadedConversation, question: str) -> tuple[list[str], str]:
    """The turns memsite's search returns for the question (messages only, TOP_K), best first,
    and the vector engine's error if it had one."""
    filters = selectors.filters_from({"kinds": [SearchKind.MESSAGE]}, team_id=loaded.team.pk)
    result = selectors.search(filters=filters, query=question, limit=TOP_K)
    turns = [loaded.turn_of_message[hit.item.message_id] for hit in result.hits if hit.item.message_id is not None]
    return _distinct(turns), result.vector_error


def _distinct(turn_ids: Sequence[str]) -> list[str]:
    """Each turn once, at its best place (a long message is indexed in several pieces)."""
    return list(dict.fromkeys(turn_ids))


def _turn_texts(conversation: Conversation) -> list[tuple[str, str]]:
    return [(turn["id"], message_content(turn)) for session in conversation["sessions"] for turn in session["turns"]]


def bm25_rankings(*, conversation: Conversation) -> dict[str, list[str]]:
    """Question id -> the TOP_K turns of the textbook BM25 over the conversation's turns."""
    index = Bm25Index.build(_turn_texts(conversation))
    return {q["id"]: index.rank(q["question"], limit=TOP_K) for q in conversation["questions"]}


def dense_rankings(*, conversation: Conversation) -> dict[str, list[str]]:
    """Question id -> the TOP_K turns nearest the question by the configured embedding backend
    (exact cosine over every turn; no similarity floor, no word match)."""
    embedder = get_embedder()
    documents = _turn_texts(conversation)
    turn_vectors = embedder.embed([text for _, text in documents], purpose="document")
    questions = conversation["questions"]
    question_vectors = embedder.embed([q["question"] for q in questions], purpose="query")
    similarities = np.asarray(question_vectors) @ np.asarray(turn_vectors).T  # rows are unit vectors
    rankings: dict[str, list[str]] = {}
    for row, question in zip(similarities, questions, strict=True):
        best = np.argsort(-row, kind="stable")[:TOP_K]
        rankings[question["id"]] = [documents[int(position)][0] for position in best]
    return rankings


def evaluate(
    *,
    evalset: EvalSet,
    source: str,
    systems: Sequence[str] = SYSTEMS,
    keep: bool = False,
    dated: bool = True,
    progress: Callable[[str], None] = lambda line: None,
) -> EvalReport:
    """Every question of the set asked of each system; the figures per category and overall.
    The teams made for it are deleted at the end (also when it fails) unless `keep`."""
    started = time.monotonic()
    clock = _Clock()
    warnings: list[str] = []
    results: list[QuestionResult] = []
    teams: list[Team] = []
    stamp = uuid.uuid4().hex[:8]  # runs never share a team, even with kept teams around
    try:
        total = len(evalset["conversations"])
        for number, conversation in enumerate(evalset["conversations"], start=1):
            rankings = _rank_conversation(
                conversation=conversation,
                systems=systems,
                stamp=stamp,
                clock=clock,
                teams=teams,
                warnings=warnings,
                dated=dated,
            )
            results += [
                QuestionResult(
                    conversation=conversation["id"],
                    id=q["id"],
                    category=q["category"],
                    question=q["question"],
                    evidence=q["evidence"],
                    rankings={system: rankings[system][q["id"]] for system in systems},
                )
                for q in conversation["questions"]
            ]
            progress(f"conversation {number}/{total} ({conversation['id']}): {len(conversation['questions'])} asked")
    finally:
        if not keep:
            for team in teams:
                tenancy.team_delete(team=team)
    return EvalReport(
        file=source,
        systems=list(systems),
        conversations=len(evalset["conversations"]),
        sessions=sum(len(c["sessions"]) for c in evalset["conversations"]),
        turns=sum(len(s["turns"]) for c in evalset["conversations"] for s in c["sessions"]),
        questions=_question_counts(results),
        setup=_setup(systems, dated=dated),
        timings=Timings(
            load_seconds=round(clock.load, 2),
            index_seconds=round(clock.index, 2),
            search_seconds={system: round(clock.search.get(system, 0.0), 2) for system in systems},
            total_seconds=round(time.monotonic() - started, 2),
        ),
        figures={system: _figures_by_category(results, system) for system in systems},
        warnings=warnings,
        teams=[team.name for team in teams],
        results=results,
    )


def _rank_conversation(
    *,
    conversation: Conversation,
    systems: Sequence[str],
    stamp: str,
    clock: _Clock,
    teams: list[Team],
    warnings: list[str],
    dated: bool = True,
) -> dict[str, dict[str, list[str]]]:
    """System -> question id -> ranking, for one conversation."""
    rankings: dict[str, dict[str, list[str]]] = {}
    if "memsite" in systems:
        team = tenancy.team_get_or_create(name=f"{TEAM_PREFIX}-{stamp}-{conversation['id']}"[:100])
        teams.append(team)  # before loading: a load that fails half-way is deleted too
        rankings["memsite"] = _memsite_rankings(
            conversation=conversation, team=team, clock=clock, warnings=warnings, dated=dated
        )
    for system, rank in (("bm25", bm25_rankings), ("dense", dense_rankings)):
        if system in systems:
            moment = time.monotonic()
            rankings[system] = rank(conversation=conversation)
            clock.add_search(system, time.monotonic() - moment)
    return rankings


def _memsite_rankings(
    *, conversation: Conversation, team: Team, clock: _Clock, warnings: list[str], dated: bool = True
) -> dict[str, list[str]]:
    """Question id -> memsite's ranking: the conversation loaded into `team`, indexed, then asked."""
    moment = time.monotonic()
    with jobs_run_here():
        loaded = conversation_load(conversation=conversation, team=team, dated=dated)
        clock.load += time.monotonic() - moment
        moment = time.monotonic()
        index_until_done(team_id=team.pk)
    clock.index += time.monotonic() - moment
    warnings += _index_warnings(loaded, conversation_id=conversation["id"])
    moment = time.monotonic()
    rankings: dict[str, list[str]] = {}
    for q in conversation["questions"]:
        rankings[q["id"]], vector_error = memsite_ranking(loaded=loaded, question=q["question"])
        if vector_error:
            warnings.append(f"{conversation['id']} / {q['id']}: vector search skipped ({vector_error})")
    clock.add_search("memsite", time.monotonic() - moment)
    return rankings


def _index_warnings(loaded: LoadedConversation, *, conversation_id: str) -> list[str]:
    waiting = SearchItem.objects.filter(team_id=loaded.team.pk).exclude(state=SearchItem.State.INDEXED)
    unsearchable = dict(Counter(waiting.values_list("state", flat=True)))
    return [f"{conversation_id}: items not embedded: {unsearchable}"] if unsearchable else []


def _setup(systems: Sequence[str], *, dated: bool) -> Setup:
    """What answered: the engines only when memsite was asked (the baselines use no database)."""
    asked_memsite = "memsite" in systems
    return Setup(
        database=connection.vendor if asked_memsite else "-",
        lexical_engine=engines.lexical_engine_name() if asked_memsite else "-",
        vector_engine=engines.vector_engine_name() if asked_memsite else "-",
        embedding_model=get_embedder().model,
        top_k=TOP_K,
        dated=dated,
    )


def _categories(results: Sequence[QuestionResult]) -> list[str]:
    present = {r["category"] for r in results}
    return [category for category in CATEGORIES if category in present]


def _question_counts(results: Sequence[QuestionResult]) -> dict[str, int]:
    counts = {category: sum(1 for r in results if r["category"] == category) for category in _categories(results)}
    return {**counts, OVERALL: len(results)}


def _figures_by_category(results: Sequence[QuestionResult], system: str) -> dict[str, dict[str, float]]:
    def figures(selected: Sequence[QuestionResult]) -> dict[str, float]:
        return mean_figures([question_figures(ranking=r["rankings"][system], evidence=r["evidence"]) for r in selected])

    by_category = {c: figures([r for r in results if r["category"] == c]) for c in _categories(results)}
    return {**by_category, OVERALL: figures(results)}


def report_lines(report: EvalReport) -> list[str]:
    """The report as a Markdown table (one row per category and system) with its setup and timings."""
    setup, timings = report["setup"], report["timings"]
    names = list(next(iter(report["figures"].values()))[OVERALL]) if report["figures"] else []
    lines = [
        f"Recall on {report['file']}: {report['conversations']} conversations, {report['sessions']} sessions, "
        f"{report['turns']} turns, {report['questions'][OVERALL]} questions.",
        f"Database {setup['database']} ({setup['lexical_engine']} + {setup['vector_engine']}), embedding model "
        f"{setup['embedding_model']}, top {setup['top_k']} messages; turns "
        + ("said at their session's date." if setup["dated"] else "without a time of their own (--undated)."),
        "",
        "| category | questions | system | " + " | ".join(names) + " |",
        "|---|---:|---|" + "---:|" * len(names),
    ]
    for category, count in report["questions"].items():
        for system in report["systems"]:
            values = report["figures"][system][category]
            label = f"**{category}**" if category == OVERALL else category
            lines.append(f"| {label} | {count} | {system} | " + " | ".join(f"{values[n]:.3f}" for n in names) + " |")
    searches = ", ".join(f"{system} {seconds:.1f} s" for system, seconds in timings["search_seconds"].items())
    lines += [
        "",
        f"Timings: load {timings['load_seconds']:.1f} s, index {timings['index_seconds']:.1f} s, "
        f"questions: {searches}; total {timings['total_seconds']:.1f} s.",
    ]
    lines += [f"Warning: {warning}" for warning in report["warnings"][:20]]
    return lines
