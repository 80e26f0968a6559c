"""Keeping the search index up to date: what other domains call when they write, and the
durable job (claim, batch, retry, sweep) that embeds what they wrote, on the "search" queue.

Nothing slow runs on a request. Messages cost an append nothing: the append's own session-row
UPDATE tells whether the session was caught up (`search_indexed_seq`), and only then does it wake
the indexer; the job reads the messages after the session's cursor. Other sources (facts,
summaries, agent record entries, experiences, shared memory) are written rarely: their writers
store the text to index as pending items in their own transaction (`index_docs`), so an edit is
never lost between the write and the job. Vectors are computed by the job, outside any
transaction, and written only if the item's text is still the one that was embedded.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import numpy as np
from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from memory_app import jobs
from memory_app.agent_records.models import AgentMemoryEntry
from memory_app.compaction.models import CompactionRun
from memory_app.conversations.models import Message, Session
from memory_app.facts.models import Fact
from memory_app.memory_files.models import MemoryFile
from memory_app.rounds.models import Attachment, SharedMemoryEntry
from memory_app.search import ann, documents, schema
from memory_app.search.documents import Doc
from memory_app.search.embeddings import get_embedder
from memory_app.search.embeddings.base import EmbeddingBackend, EmbeddingPermanentError, EmbeddingTransientError
from memory_app.search.models import IndexRun, SearchItem, SearchKind, pending_items

log = logging.getLogger(__name__)
Status = IndexRun.Status
State = SearchItem.State

JOB = jobs.JobKind(
    kind="search",
    label="Search indexing",
    model=IndexRun,
    task="memory_app.tasks.index_search",
    queue_setting="SEARCH_QUEUE",
    metric_label="search_index",
    pending=Status.PENDING,
    active=Status.RUNNING,
    done=Status.DONE,
    failed=Status.FAILED,
    max_attempts_setting="SEARCH_MAX_ATTEMPTS",
    backoff_setting="SEARCH_RETRY_BACKOFF",
    resend_after_setting="SEARCH_RESEND_AFTER",
    deadline_setting="SEARCH_RUNNING_DEADLINE",
    queued_field="queued_at",
    claimed_field="started_at",
    finished_field="finished_at",
    duration_field="duration_ms",
    claim_when_due=True,
    retry_service="memory_app.search.services.index_job_retry",
    argument_fields=("trigger", "embedding_model"),
    per_session=False,
)

SESSIONS_PER_STEP = 20  # sessions whose new messages one step turns into items
# Messages of one session turned into items in one transaction. On SQLite every other write waits
# for it: with 500, creating three jobs waited 9.4 s behind two index runs (bench/queue_fairness.py).
MESSAGES_PER_SESSION_STEP = 100
_LINK_FIELDS = {
    "session_id",
    "message_id",
    "compaction_run_id",
    "fact_id",
    "record_entry_id",
    "shared_memory_id",
    "attachment_id",
}


# --- what writers call --------------------------------------------------------------------------


def index_request(*, team_id: int, trigger: str = IndexRun.Trigger.WRITE) -> None:
    """Make sure a pending index run exists for the team, and send it when the caller's
    transaction commits. Cheap when one is already waiting (one indexed read).

    While a session waits for a run, its appends wake nothing (they cost no query at all); a run
    for writes may also wait SEARCH_INDEX_DELAY seconds (off by default) to gather more of them.
    """
    if IndexRun.objects.filter(team_id=team_id, status=Status.PENDING).exists():
        return
    delay = settings.SEARCH_INDEX_DELAY if trigger == IndexRun.Trigger.WRITE else 0.0
    try:
        with transaction.atomic():
            run = IndexRun.objects.create(
                team_id=team_id, trigger=trigger, queued_at=timezone.now() + timedelta(seconds=delay)
            )
    except IntegrityError:  # a concurrent writer queued it between our check and insert
        return
    jobs.send(JOB, run.pk, countdown=delay, on_commit=True)


def wake_on_commit(*, team_id: int) -> None:
    """For the append path: queue the team's index run once the append's transaction commits
    (at once in autocommit), so a rolled-back append queues nothing."""
    transaction.on_commit(lambda: index_request(team_id=team_id))


def _item_fields(doc: Doc) -> dict[str, Any]:
    links = {name: value for name, value in doc.links.items() if name in _LINK_FIELDS and value is not None}
    return {
        **links,
        "agent": (doc.agent or "")[:200],
        "role": (doc.role or "")[:200],
        "seq": doc.seq,
        "occurred_at": doc.occurred_at or timezone.now(),
        "valid_from": doc.valid_from,
        "invalidated_at": doc.invalidated_at,
        "context": doc.context,
    }


def index_docs(*, team_id: int, docs: Iterable[Doc], sources: Iterable[tuple[str, str]] = (), wake: bool = True) -> int:
    """Store these pieces of text as the whole of their sources' index entries.

    A piece whose text is unchanged keeps its vector (only what a search filters on is
    refreshed); a changed one goes back to pending; pieces a source no longer has are deleted.
    `sources` names (kind, source_key) pairs that now have no text at all. Returns how many
    pieces need embedding.
    """
    by_source: dict[tuple[str, str], dict[int, Doc]] = {key: {} for key in sources}
    for doc in docs:  # a source given twice: its last state wins
        by_source.setdefault((doc.kind, doc.source_key), {})[doc.chunk] = doc
    if not by_source:
        return 0
    ordered = {key: [pieces[chunk] for chunk in sorted(pieces)] for key, pieces in by_source.items()}
    with transaction.atomic():
        stale = _store_sources(team_id=team_id, pieces_of=ordered)
    if stale and wake:
        index_request(team_id=team_id)
    return stale


# Sources whose stored pieces one query reads: a step's messages in one go, well within every
# database's limit on bound parameters.
SOURCES_PER_QUERY = 500


def _store_sources(*, team_id: int, pieces_of: dict[tuple[str, str], list[Doc]]) -> int:
    """Write each source's pieces in a few statements for all of them (not three per source: an
    index run turns a hundred messages a step into items). Returns how many need embedding."""
    existing = _stored_pieces(team_id=team_id, sources=list(pieces_of))
    surplus = [
        item_id
        for key, pieces in pieces_of.items()
        for chunk, (item_id, _) in existing.get(key, {}).items()
        if chunk >= len(pieces)
    ]
    if surplus:
        SearchItem.objects.filter(pk__in=surplus).delete()
    created: list[SearchItem] = []
    changed: list[tuple[int, dict[str, Any]]] = []  # (item id, the fields it gets)
    stale = 0
    for (kind, source_key), pieces in pieces_of.items():
        stored = existing.get((kind, source_key), {})
        for doc in pieces:
            fields = _item_fields(doc)
            if doc.chunk not in stored:
                created.append(
                    SearchItem(
                        team_id=team_id,
                        kind=kind,
                        source_key=source_key,
                        chunk=doc.chunk,
                        text=doc.text,
                        text_hash=doc.text_hash,
                        **fields,
                    )
                )
                continue
            item_id, text_hash = stored[doc.chunk]
            if text_hash != doc.text_hash:  # a new text: embedded again
                fields.update(text=doc.text, text_hash=doc.text_hash, state=State.PENDING, error="")
                stale += 1
            changed.append((item_id, fields))
    _update_in_bulk(changed)
    SearchItem.objects.bulk_create(created, batch_size=SOURCES_PER_QUERY)
    return stale + len(created)


def _stored_pieces(
    *, team_id: int, sources: list[tuple[str, str]]
) -> dict[tuple[str, str], dict[int, tuple[int, str]]]:
    """(kind, source_key) -> chunk -> (item id, text hash) of what is stored for these sources."""
    stored: dict[tuple[str, str], dict[int, tuple[int, str]]] = {}
    wanted = set(sources)
    for start in range(0, len(sources), SOURCES_PER_QUERY):
        part = sources[start : start + SOURCES_PER_QUERY]
        rows = SearchItem.objects.filter(
            team_id=team_id, kind__in={kind for kind, _ in part}, source_key__in={key for _, key in part}
        ).values_list("id", "kind", "source_key", "chunk", "text_hash")
        for item_id, kind, source_key, chunk, text_hash in rows:
            if (kind, source_key) in wanted:  # another kind may share a source key
                stored.setdefault((kind, source_key), {})[chunk] = (item_id, text_hash)
    return stored


def _update_in_bulk(changes: list[tuple[int, dict[str, Any]]]) -> None:
    """UPDATE stored items, one statement per set of fields (a piece's links vary by kind: a field
    it does not carry is left as it is)."""
    by_fields: dict[tuple[str, ...], list[SearchItem]] = {}
    for item_id, fields in changes:
        by_fields.setdefault(tuple(sorted(fields)), []).append(SearchItem(pk=item_id, **fields))
    for names, items in by_fields.items():
        SearchItem.objects.bulk_update(items, list(names), batch_size=SOURCES_PER_QUERY)


def index_forget(*, team_id: int, kind: str, source_keys: Iterable[str]) -> int:
    """Remove the index entries of sources that were deleted (those without a foreign key here:
    experiences). Returns how many pieces went."""
    deleted, _ = SearchItem.objects.filter(team_id=team_id, kind=kind, source_key__in=list(source_keys)).delete()
    return deleted


def index_after_purge() -> None:
    """After a session or team was deleted: no trace of its text may stay in the full-text index."""
    schema.optimize_lexical()


# --- per-source helpers the writing domains call ---------------------------------------------------


def index_facts(*, team_id: int, facts: Iterable[Fact]) -> int:
    return index_docs(team_id=team_id, docs=[doc for fact in facts for doc in documents.fact_docs(fact)])


def index_summary(*, run: CompactionRun, agent: str = "") -> int:
    return index_docs(
        team_id=run.team_id,
        docs=list(documents.summary_docs(run, agent=agent)),
        sources=[(SearchKind.SUMMARY, str(run.pk))],
    )


def forget_summaries(*, session_id: Any) -> int:
    """Reverted summaries no longer stand for anything: their text leaves the index."""
    reverted = CompactionRun.objects.filter(session_id=session_id).exclude(status=CompactionRun.Status.DONE)
    deleted, _ = SearchItem.objects.filter(kind=SearchKind.SUMMARY, compaction_run__in=reverted).delete()
    return deleted


def index_record_entries(*, team_id: int, entries: Iterable[AgentMemoryEntry], session_id: Any, agent: str) -> int:
    entries = list(entries)
    docs = [doc for entry in entries for doc in documents.record_entry_docs(entry, session_id=session_id, agent=agent)]
    return index_docs(team_id=team_id, docs=docs, sources=[(SearchKind.RECORD, str(e.pk)) for e in entries])


def index_shared_memory(*, team_id: int, entries: Iterable[SharedMemoryEntry]) -> int:
    entries = list(entries)
    docs = [doc for entry in entries for doc in documents.shared_memory_docs(entry)]
    return index_docs(team_id=team_id, docs=docs, sources=[(SearchKind.SHARED_MEMORY, str(e.pk)) for e in entries])


def index_memory_file(*, file: MemoryFile) -> int:
    """A memory file's text, as it is now (an emptied file has no entry)."""
    docs = list(documents.memory_file_docs(file))
    return index_docs(team_id=file.team_id, docs=docs, sources=[(SearchKind.MEMORY_FILE, str(file.pk))])


def index_message_edit(*, message: Message) -> int:
    """An edited message (and its text attachments) is indexed again if it was indexed before;
    otherwise the job will read it when it reaches its seq. The message after it is indexed again
    too: the edited one is the turn it answers (its context)."""
    session = Session.objects.only("search_indexed_seq", "team_id", "metadata").get(pk=message.session_id)
    if message.seq > session.search_indexed_seq:
        return 0
    pairs = [(message, _message_before(message))]
    following = _message_after(message)
    if following is not None and following.seq <= session.search_indexed_seq:
        pairs.append((following, message))
    # The session's agent, as the index run gives it: an unnamed turn's speaker stays the same.
    agent = session.agent_name
    return index_docs(
        team_id=session.team_id,
        docs=[
            doc
            for current, previous in pairs
            for doc in documents.message_docs(current, agent=agent, previous=previous)
        ],
        sources=[(SearchKind.MESSAGE, str(current.pk)) for current, _ in pairs],
    )


def _message_before(message: Message) -> Message | None:
    return Message.objects.filter(session_id=message.session_id, seq__lt=message.seq).order_by("-seq").first()


def _message_after(message: Message) -> Message | None:
    return Message.objects.filter(session_id=message.session_id, seq__gt=message.seq).order_by("seq").first()


def index_after_message_delete(*, session_id: Any, seq: int) -> int:
    """A deleted message was the turn the next one answers: that one's context (which held the
    deleted words) is built again from the message now before it."""
    following = Message.objects.filter(session_id=session_id, seq__gt=seq).order_by("seq").first()
    return 0 if following is None else index_message_edit(message=following)


# --- the job ----------------------------------------------------------------------------------------


@dataclass
class Progress:
    messages_read: int = 0
    indexed: int = 0
    failed: int = 0


def search_index_execute(*, run_id: str) -> str:
    """Bring the run's team's index up to date: turn new messages into items, then embed pending
    items in batches, until nothing is left or SEARCH_RUN_SECONDS have passed (a follow-up run,
    sent to the back of the queue, takes the rest: the worker slot is free between two slices
    for whatever else waits). A transient embedding error retries the run with backoff; a text
    the backend refuses marks that item failed and the run goes on."""
    if not jobs.claim(JOB, run_id):
        return jobs.ALREADY_CLAIMED
    run = IndexRun.objects.get(pk=run_id)
    started = time.monotonic()
    progress = Progress()
    embedder = get_embedder()
    more = False
    until = started + settings.SEARCH_RUN_SECONDS
    try:
        while True:
            read = _materialize_messages(team_id=run.team_id, until=until)
            progress.messages_read += read
            embedded = _embed_batch(team_id=run.team_id, embedder=embedder, progress=progress)
            if not read and not embedded:
                break
            if time.monotonic() > until:
                more = True
                break
    except EmbeddingTransientError as exc:
        return jobs.retry_or_fail(
            JOB, run, error=str(exc), retry_after=exc.retry_after, started=started, fields=_counts(progress)
        )
    more = _maintain_vector_index(run, embedder, until=until) or more
    jobs.complete(
        JOB,
        run,
        fields={
            **_counts(progress),
            "embedding_model": embedder.model,
            "duration_ms": int((time.monotonic() - started) * 1000),
        },
    )
    if more or has_backlog(run.team_id):
        index_request(team_id=run.team_id)
    return "done"


def _maintain_vector_index(run: IndexRun, embedder: EmbeddingBackend, *, until: float) -> bool:
    """Without pgvector: build or refresh the team's in-process vector index when it is due, within
    the run's slice (at least one step, so a long backlog cannot hold it off); `manage.py reindex`
    rebuilds it. Returns whether it has work left (a follow-up run takes it)."""
    if schema.pgvector_installed() or not embedder.dimension:
        return False
    key = ann.IndexKey(team_id=run.team_id, model=embedder.model, dimension=embedder.dimension)
    try:
        return ann.maintain(key=key, until=until, rebuild=run.trigger == IndexRun.Trigger.REINDEX)
    except OSError as exc:  # a full or read-only disk: searches stay exact, indexing goes on
        log.warning("search index of team %s not written: %s", run.team_id, exc)
        return False


def _counts(progress: Progress) -> dict[str, int]:
    return {"items_indexed": progress.indexed, "items_failed": progress.failed, "messages_read": progress.messages_read}


def _dirty_sessions(team_id: int | None = None) -> Any:
    sessions = Session.objects.filter(last_seq__gt=F("search_indexed_seq"))
    return sessions.filter(team_id=team_id) if team_id is not None else sessions


def has_backlog(team_id: int) -> bool:
    """Whether the team has messages not yet read into items, or items waiting for a vector."""
    return _dirty_sessions(team_id).exists() or pending_items(team_id).exists()


def _materialize_messages(*, team_id: int, until: float | None = None) -> int:
    """Turn the messages after each session's cursor into items (a step's worth); returns how many
    were read. Stops between two sessions once `until` (a time.monotonic()) has passed: a step of
    many sessions would otherwise overrun the run's slice."""
    read = 0
    for session in _dirty_sessions(team_id).only("id", "team_id", "last_seq", "search_indexed_seq", "metadata")[
        :SESSIONS_PER_STEP
    ]:
        read += _materialize_session(session)
        if until is not None and time.monotonic() > until:
            break
    return read


def _materialize_session(session: Session) -> int:
    cursor = session.search_indexed_seq
    through = min(session.last_seq, cursor + MESSAGES_PER_SESSION_STEP)
    # From the message before the cursor: it is the turn the first new one answers (its context).
    read = list(Message.objects.filter(session_id=session.pk, seq__gte=cursor, seq__lte=through).order_by("seq"))
    previous_of = {message.pk: before for before, message in zip([None, *read], read, strict=False)}
    messages = [message for message in read if message.seq > cursor]
    attachments = Attachment.objects.filter(message__in=[m.pk for m in messages]).order_by("message_id", "position")
    by_message: dict[Any, list[Attachment]] = {}
    for attachment in attachments:
        by_message.setdefault(attachment.message_id, []).append(attachment)
    agent = session.agent_name
    docs: list[Doc] = []
    for message in messages:
        docs.extend(documents.message_docs(message, agent=agent, previous=previous_of[message.pk]))
        for attachment in by_message.get(message.pk, []):
            docs.extend(documents.attachment_docs(attachment, message, agent=agent))
    with transaction.atomic():
        # Only if no other execution moved the cursor meanwhile (the sweeper's copy of this run).
        # The update takes the session's row lock, which a message delete takes first too: the
        # messages still here now stay until the items are written.
        if not Session.objects.filter(pk=session.pk, search_indexed_seq=cursor).update(search_indexed_seq=through):
            return 0
        kept = set(Message.objects.filter(pk__in=[message.pk for message in messages]).values_list("pk", flat=True))
        docs = [doc for doc in docs if doc.links.get("message_id") in kept]  # deleted since they were read
        index_docs(team_id=session.team_id, docs=docs, wake=False)
    return len(messages)


def _embed_batch(*, team_id: int, embedder: EmbeddingBackend, progress: Progress) -> int:
    """Embed one batch of the team's pending items; returns how many it took."""
    batch = list(
        SearchItem.objects.filter(team_id=team_id, state=State.PENDING)
        .order_by("id")
        .values_list("id", "text", "text_hash", "agent")[: settings.SEARCH_EMBED_BATCH]
    )
    if not batch:
        return 0
    texts = [
        (item_id, documents.without_speaker_label(text, agent), text_hash) for item_id, text, text_hash, agent in batch
    ]
    vectors: Sequence[Any]
    try:
        vectors = list(embedder.embed([text for _, text, _ in texts], purpose="document"))
    except EmbeddingPermanentError:
        vectors = _embed_one_by_one(texts, embedder, progress)
    _store_vectors(texts, vectors, embedder)
    progress.indexed += sum(1 for vector in vectors if vector is not None)
    return len(batch)


def _embed_one_by_one(batch: list[tuple[int, str, str]], embedder: EmbeddingBackend, progress: Progress) -> list[Any]:
    """The backend refused the batch: find the texts it refuses, mark them failed, embed the rest."""
    vectors: list[Any] = []
    for item_id, text, text_hash in batch:
        try:
            vectors.append(embedder.embed([text], purpose="document")[0])
        except EmbeddingPermanentError as exc:
            SearchItem.objects.filter(pk=item_id, text_hash=text_hash).update(state=State.FAILED, error=str(exc)[:500])
            progress.failed += 1
            vectors.append(None)
    return vectors


_vector_indexes: set[int] = set()  # dimensions whose HNSW index this process has made sure of


def _store_vectors(batch: list[tuple[int, str, str]], vectors: Sequence[Any], embedder: EmbeddingBackend) -> None:
    use_pgvector = schema.pgvector_installed()
    if use_pgvector and embedder.dimension not in _vector_indexes:
        schema.ensure_vector_index(embedder.dimension)
        _vector_indexes.add(embedder.dimension)
    embedded = [
        (item_id, text_hash, np.asarray(vector, dtype="<f4"))
        for (item_id, _, text_hash), vector in zip(batch, vectors, strict=True)
        if vector is not None
    ]
    if not embedded:
        return
    # One statement for the batch, not an ORM update per item (a chat turn's vector is ~2 ms of
    # model: the per-item statement was a large share of the rest). Written only where the text is
    # still what was embedded: an edit meanwhile left its item pending.
    pgvector_column = ", embedding_vec = %s::vector" if use_pgvector else ""
    sql = (
        f"UPDATE {schema.TABLE} SET embedding = %s, embedding_model = %s, embedding_dim = %s, state = %s, "  # noqa: S608
        f"indexed_at = %s, error = ''{pgvector_column} WHERE id = %s AND text_hash = %s"
    )
    indexed_at = connection.ops.adapt_datetimefield_value(timezone.now())
    rows = [
        [
            values.tobytes(),
            embedder.model,
            int(values.shape[0]),
            State.INDEXED.value,
            indexed_at,
            *([_pgvector_literal(values)] if use_pgvector else []),
            item_id,
            text_hash,
        ]
        for item_id, text_hash, values in embedded
    ]
    with transaction.atomic():
        _lock_sessions_of([item_id for item_id, _, _ in embedded])
        with connection.cursor() as cursor:
            cursor.executemany(sql, rows)


def _lock_sessions_of(item_ids: list[int]) -> None:
    """Row-lock the sessions these items belong to, in one order, before writing the items. A
    message delete locks its session, then deletes the message's items: a vector store that
    locked items first and waited on one of them deadlocked with it on PostgreSQL. (SQLite has
    one writer at a time: nothing to do.)"""
    session_ids = SearchItem.objects.filter(pk__in=item_ids, session_id__isnull=False).values("session_id")
    list(Session.objects.select_for_update(no_key=True).filter(pk__in=session_ids).order_by("pk").values_list("pk"))


def _pgvector_literal(values: np.ndarray) -> str:
    return "[" + ",".join(f"{value:.7g}" for value in values.tolist()) + "]"


def index_retry(*, run: IndexRun) -> tuple[IndexRun, bool]:
    """After a failed index run (the ops page's retry): the run itself is not run again, the team's
    next run takes up everything it left pending. Returns (the waiting run, whether it is new)."""
    waiting = IndexRun.objects.filter(team_id=run.team_id, status=Status.PENDING).first()
    if waiting is not None:
        return waiting, False
    index_request(team_id=run.team_id, trigger=IndexRun.Trigger.REINDEX)
    queued = IndexRun.objects.filter(team_id=run.team_id, status=Status.PENDING).first()
    return (queued, True) if queued is not None else (run, False)


def index_job_retry(*, job: IndexRun) -> jobs.Retried:
    """The job registry's retry of a run (the ops page's button): `index_retry`."""
    run, created = index_retry(run=job)
    return jobs.Retried(job=run, created=created)


# --- sweeping and re-indexing ---------------------------------------------------------------------


def search_index_sweep() -> dict[str, int]:
    """The lifecycle's sweep of index runs, plus a run for every team with unindexed messages or
    pending items and none waiting (a lost wake-up, a crash between a write and its send)."""
    counts = jobs.sweep(JOB)
    waiting = IndexRun.objects.filter(status__in=JOB.unfinished).values_list("team_id", flat=True)
    teams = set(_dirty_sessions().exclude(team_id__in=waiting).values_list("team_id", flat=True)[:500])
    teams |= set(
        SearchItem.objects.filter(state=State.PENDING)
        .exclude(team_id__in=waiting)
        .values_list("team_id", flat=True)
        .distinct()[:500]
    )
    for team_id in teams:
        index_request(team_id=team_id, trigger=IndexRun.Trigger.SWEEP)
    return {**counts, "woken": len(teams)}


def search_reindex(*, team_id: int | None = None, kind: str | None = None) -> dict[str, int]:
    """Rebuild the index from the sources: every piece is compared with its source's text (an
    unchanged one keeps its vector), pieces of a source that is gone are deleted, and vectors made
    by another model than the configured one are computed again. Returns counts per step."""
    from django.apps import apps

    counts = {"sources": 0, "stale": 0, "reembed": 0, "teams": 0}
    scope = Q(team_id=team_id) if team_id is not None else Q()
    kinds = [kind] if kind else [choice for choice, _ in SearchKind.choices]
    if SearchKind.MESSAGE in kinds or SearchKind.ATTACHMENT in kinds:
        counts["sources"] += Session.objects.filter(scope).update(search_indexed_seq=0)
    providers: dict[str, Callable[[Q], list[tuple[int, list[Doc]]]]] = {
        SearchKind.FACT: _fact_sources,
        SearchKind.SUMMARY: _summary_sources,
        SearchKind.RECORD: _record_sources,
        SearchKind.SHARED_MEMORY: _shared_memory_sources,
        SearchKind.MEMORY_FILE: _memory_file_sources,
    }
    experiences: Any = apps.get_app_config("experiences_app")  # asked through its config: no import
    for name in kinds:
        if name == SearchKind.EXPERIENCE:
            for owner, docs in experiences.experience_search_documents(team_id=team_id):
                counts["stale"] += _replace_kind(team_id=owner, kind=name, docs=docs)
        elif name in providers:
            for owner, docs in providers[name](scope):
                counts["stale"] += _replace_kind(team_id=owner, kind=name, docs=docs)
    model = get_embedder().model
    counts["reembed"] = (
        SearchItem.objects.filter(scope, kind__in=kinds)
        .filter(Q(state=State.FAILED) | (Q(state=State.INDEXED) & ~Q(embedding_model=model)))
        .update(state=State.PENDING, error="")
    )
    counts["reembed"] += _pending_without_pgvector_vector(scope, kinds)
    teams = set(Session.objects.filter(scope).values_list("team_id", flat=True).distinct())
    teams |= set(SearchItem.objects.filter(scope).values_list("team_id", flat=True).distinct())
    for owner in teams:
        index_request(team_id=owner, trigger=IndexRun.Trigger.REINDEX)
    counts["teams"] = len(teams)
    return counts


def _pending_without_pgvector_vector(scope: Q, kinds: list[str]) -> int:
    """Items embedded before pgvector was enabled have no vector in its column: embed them again
    (the stored float32 vector is not converted in SQL: it is one pass of the index job)."""
    if not schema.pgvector_installed():
        return 0
    missing = SearchItem.objects.filter(scope, kind__in=kinds, state=State.INDEXED).extra(
        where=["embedding_vec IS NULL"]
    )
    return missing.update(state=State.PENDING)


def _replace_kind(*, team_id: int, kind: str, docs: list[Doc]) -> int:
    keep = {doc.source_key for doc in docs}
    orphans = SearchItem.objects.filter(team_id=team_id, kind=kind).exclude(source_key__in=keep)
    orphans.delete()
    return index_docs(team_id=team_id, docs=docs, wake=False)


def _grouped(rows: Iterable[tuple[int, Doc]]) -> list[tuple[int, list[Doc]]]:
    teams: dict[int, list[Doc]] = {}
    for team_id, doc in rows:
        teams.setdefault(team_id, []).append(doc)
    return list(teams.items())


def _fact_sources(scope: Q) -> list[tuple[int, list[Doc]]]:
    return _grouped((fact.team_id, doc) for fact in Fact.objects.filter(scope) for doc in documents.fact_docs(fact))


def _summary_sources(scope: Q) -> list[tuple[int, list[Doc]]]:
    runs = CompactionRun.objects.filter(scope, status=CompactionRun.Status.DONE).select_related("session")
    return _grouped(
        (run.team_id, doc) for run in runs for doc in documents.summary_docs(run, agent=run.session.agent_name)
    )


def _record_sources(scope: Q) -> list[tuple[int, list[Doc]]]:
    entries = AgentMemoryEntry.objects.filter(scope).select_related("memory")
    return _grouped(
        (entry.team_id, doc)
        for entry in entries
        for doc in documents.record_entry_docs(entry, session_id=entry.memory.session_id, agent=entry.memory.agent)
    )


def _shared_memory_sources(scope: Q) -> list[tuple[int, list[Doc]]]:
    entries = SharedMemoryEntry.objects.filter(scope)
    return _grouped((entry.team_id, doc) for entry in entries for doc in documents.shared_memory_docs(entry))


def _memory_file_sources(scope: Q) -> list[tuple[int, list[Doc]]]:
    files = MemoryFile.objects.filter(scope, deleted_at__isnull=True)
    return _grouped((file.team_id, doc) for file in files for doc in documents.memory_file_docs(file))
