"""Fact writes: add (or see again), contradiction handling, invalidate, restore, edit.

A fact is identified by its normalised triple within a scope (a session, or the whole
team). The database keeps one live copy per scope (`uniq_live_fact_per_scope`), so
writers racing to add the same fact end with one row whose `times_seen` counts them all.
Facts are never deleted here: a contradicted or removed fact is invalidated, and `as_of`
reads still find it.
"""

from __future__ import annotations

import functools
import hashlib
import json
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from memory_app.conversations.models import Session
from memory_app.events.models import MemoryEvent
from memory_app.events.services import event_record
from memory_app.facts.locks import fact_lock, subject_predicate_lock
from memory_app.facts.models import Fact
from memory_app.facts.output import normalize_term
from memory_app.facts.selectors import term_key
from memory_app.search import services as search
from memory_app.tenancy.models import Team
from memsite.errors import Conflict, InvalidInput

MANUAL_EXTRACTOR = "manual"


@functools.lru_cache(maxsize=8)
def _single_valued(predicates: tuple[str, ...]) -> frozenset[str]:
    return frozenset(normalize_term(p) for p in predicates)


def is_single_valued(predicate_norm: str) -> bool:
    """A predicate whose new value replaces the old one (MEMSITE_SINGLE_VALUED_PREDICATES)."""
    return predicate_norm in _single_valued(tuple(settings.FACTS_SINGLE_VALUED_PREDICATES))


def scope_key(session_id: uuid.UUID | str | None) -> str:
    return str(session_id) if session_id else Fact.TEAM_SCOPE


def fact_key(subject_norm: str, predicate_norm: str, object_norm: str) -> str:
    return hashlib.sha256("\x1f".join((subject_norm, predicate_norm, object_norm)).encode()).hexdigest()


@dataclass(frozen=True)
class FactInput:
    """One fact to write, as written; normalised forms are derived."""

    role: str
    subject: str
    predicate: str
    object: str
    confidence: float | None = None
    replaces: bool = False
    source_message_id: uuid.UUID | None = None

    @functools.cached_property
    def norms(self) -> tuple[str, str, str]:
        return normalize_term(self.subject), normalize_term(self.predicate), normalize_term(self.object)

    @property
    def key(self) -> str:
        return fact_key(*self.norms)


@dataclass
class WriteOutcome:
    """What a batch of fact writes did (a run's counters)."""

    added: list[Fact] = field(default_factory=list)
    seen: list[Fact] = field(default_factory=list)
    invalidated: list[Fact] = field(default_factory=list)


def _check_terms(item: FactInput) -> None:
    for name, norm in zip(("subject", "predicate", "object"), item.norms, strict=True):
        if not norm:
            raise InvalidInput.for_field(name, "must contain something other than whitespace")


def _live(team_id: int, scope: str, key: str) -> Any:
    return Fact.objects.filter(team_id=team_id, scope_key=scope, fact_key=key, invalidated_at__isnull=True)


def _see_again(team_id: int, scope: str, item: FactInput, now: datetime) -> Fact | None:
    """Count one more sighting of the live fact, if there is one (an atomic increment)."""
    changes: dict[str, Any] = {"times_seen": F("times_seen") + 1, "last_seen_at": now, "updated_at": now}
    if item.confidence is not None:
        changes["confidence"] = Coalesce(F("confidence"), Value(item.confidence))
    updated = _live(team_id, scope, item.key).update(**changes)
    return _live(team_id, scope, item.key).get() if updated else None


def _event(fact: Fact, kind: str, **data: Any) -> None:
    event_record(team_id=fact.team_id, session_id=fact.session_id, kind=kind, data={"fact_id": str(fact.pk), **data})


def _invalidate_rivals(fact: Fact, now: datetime) -> list[Fact]:
    """Invalidate the other live values of the fact's (subject, predicate) in its scope.

    A curated value is superseded only by another curated one: an agent's or an extractor's
    contradiction of it is kept, invalidated by the curated fact, for an admin to review
    (restoring it from the dashboard or the API then supersedes the curated value).
    """
    rivals = list(
        Fact.objects.filter(
            team_id=fact.team_id,
            scope_key=fact.scope_key,
            subject_key=fact.subject_key,
            subject_norm=fact.subject_norm,
            predicate_norm=fact.predicate_norm,
            invalidated_at__isnull=True,
        ).exclude(pk=fact.pk)
    )
    curated = next((rival for rival in rivals if rival.curated), None)
    if curated is not None and not fact.curated:
        fact.invalidated_at, fact.invalidated_by = now, curated
        fact.save(update_fields=["invalidated_at", "invalidated_by", "updated_at"])
        _event(fact, MemoryEvent.Kind.FACT_INVALIDATED, reason="contradicts_curated", invalidated_by=str(curated.pk))
        return [fact]
    for rival in rivals:
        rival.invalidated_at, rival.invalidated_by = now, fact
        rival.save(update_fields=["invalidated_at", "invalidated_by", "updated_at"])
        _event(rival, MemoryEvent.Kind.FACT_INVALIDATED, reason="replaced", invalidated_by=str(fact.pk))
    return rivals


def write_facts(
    *,
    team_id: int,
    session_id: uuid.UUID | None,
    items: Iterable[FactInput],
    extractor: str,
    extraction_run_id: uuid.UUID | None = None,
    curated: bool = False,
) -> WriteOutcome:
    """Add each fact, or count another sighting of its live copy; apply contradictions.

    Call inside a transaction (the caller's is the unit: all or nothing). Facts are
    written in a fixed order (by key), so concurrent batches lock rows in the same order
    and cannot deadlock each other; repeats within the batch count once. Takes the
    (subject, predicate) lock of every value it replaces first, in sorted order (facts.locks).
    """
    scope = scope_key(session_id)
    now = timezone.now()
    batch = list(items)
    unique: dict[str, FactInput] = {}
    for item in batch:
        _check_terms(item)
        first = unique.setdefault(item.key, item)
        if item.replaces and not first.replaces:
            unique[item.key] = item
    # The value each replaced (subject, predicate) ends with: the batch's last statement of it.
    winners: dict[tuple[str, str], str] = {}
    for item in batch:
        if item.replaces or is_single_valued(item.norms[1]):
            winners[item.norms[:2]] = item.key
    for subject_norm, predicate_norm in sorted(winners):
        subject_predicate_lock(team_id=team_id, scope=scope, subject_norm=subject_norm, predicate_norm=predicate_norm)
    outcome = WriteOutcome()
    written: dict[str, Fact] = {}
    for item in sorted(unique.values(), key=lambda i: i.key):
        fact = _see_again(team_id, scope, item, now)
        if fact is not None:
            outcome.seen.append(fact)
        else:
            try:
                with transaction.atomic():  # a savepoint: a lost race leaves the batch usable
                    fact = _create(team_id, session_id, scope, item, extractor, extraction_run_id, now, curated)
                outcome.added.append(fact)
            except IntegrityError:  # a concurrent writer added it first: we saw it too
                fact = _see_again(team_id, scope, item, now)
                if fact is None:
                    raise
                outcome.seen.append(fact)
        written[item.key] = fact
    for key in sorted(winners.values()):
        outcome.invalidated += _invalidate_rivals(written[key], now)
    search.index_facts(team_id=team_id, facts=[*outcome.added, *outcome.invalidated])
    return outcome


def _create(
    team_id: int,
    session_id: uuid.UUID | None,
    scope: str,
    item: FactInput,
    extractor: str,
    extraction_run_id: uuid.UUID | None,
    now: datetime,
    curated: bool,
) -> Fact:
    subject_norm, predicate_norm, object_norm = item.norms
    return Fact.objects.create(
        team_id=team_id,
        session_id=session_id,
        scope_key=scope,
        role=item.role,
        subject=item.subject,
        predicate=item.predicate,
        object=item.object,
        subject_norm=subject_norm,
        predicate_norm=predicate_norm,
        object_norm=object_norm,
        fact_key=item.key,
        subject_key=term_key(subject_norm),
        object_key=term_key(object_norm),
        source_message_id=item.source_message_id,
        extraction_run_id=extraction_run_id,
        extractor=extractor,
        confidence=item.confidence,
        curated=curated,
        valid_from=now,
        last_seen_at=now,
    )


@transaction.atomic
def fact_add(
    *,
    team: Team,
    role: str,
    subject: str,
    predicate: str,
    object: str,
    session: Session | None = None,
    confidence: float | None = None,
    replaces: bool = False,
    curated: bool = False,
) -> tuple[Fact, bool]:
    """Add a fact by hand (the client's add_fact); returns (fact, created).

    The same live fact in the same scope is not duplicated: it is returned with
    times_seen + 1. A single-valued predicate's new value, or any value added with `replaces`
    (the writer says so, as an extractor's LLM may), invalidates the old ones, unless an old one
    is curated and this one is not (see `_invalidate_rivals`). `curated`: an admin adds it.
    """
    item = FactInput(
        role=role, subject=subject, predicate=predicate, object=object, confidence=confidence, replaces=replaces
    )
    outcome = write_facts(
        team_id=team.pk,
        session_id=session.pk if session else None,
        items=[item],
        extractor=MANUAL_EXTRACTOR,
        curated=curated,
    )
    if outcome.added:
        return outcome.added[0], True
    return outcome.seen[0], False


@transaction.atomic
def fact_invalidate(*, fact: Fact) -> Fact:
    """Take a fact out of the live set (the API's DELETE); the row and its history stay.

    Takes the fact's row lock (facts.locks.fact_lock).
    """
    locked = fact_lock(fact_id=fact.pk)
    if locked.invalidated_at is None:
        locked.invalidated_at = timezone.now()
        locked.save(update_fields=["invalidated_at", "updated_at"])
        _event(locked, MemoryEvent.Kind.FACT_INVALIDATED, reason="removed")
        search.index_facts(team_id=locked.team_id, facts=[locked])
    return locked


_EDITABLE = ("role", "subject", "predicate", "object", "confidence")


def _store_value(text: str) -> dict[str, Any] | None:
    """A store item's value from its edited object: a JSON object, else none (the store skips it)."""
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


@transaction.atomic
def fact_update(*, fact: Fact, data: Mapping[str, Any]) -> Fact:
    """Edit a fact (an admin), and/or restore it with `invalidated: False`; the fact is curated from then on.

    An edit that makes a live fact identical to another live fact of its scope, or a
    restore while an identical fact is live, is a Conflict. A restored or edited live
    fact with a single-valued predicate replaces the other live values, as a new one would.
    Takes the fact's row lock, then (a live fact) its (subject, predicate) lock (facts.locks).
    """
    locked = fact_lock(fact_id=fact.pk)
    changed = [name for name in _EDITABLE if name in data]
    for name in changed:
        setattr(locked, name, data[name])
    locked.curated = True
    changed.append("curated")
    item = FactInput(role=locked.role, subject=locked.subject, predicate=locked.predicate, object=locked.object)
    _check_terms(item)
    locked.subject_norm, locked.predicate_norm, locked.object_norm = item.norms
    locked.fact_key = item.key
    locked.subject_key, locked.object_key = term_key(locked.subject_norm), term_key(locked.object_norm)
    changed += ["subject_norm", "predicate_norm", "object_norm", "fact_key", "subject_key", "object_key"]
    if locked.store_namespace is not None:  # a LangGraph store item: the store reads these columns
        locked.store_namespace, locked.store_value = locked.subject, _store_value(locked.object)
        changed += ["store_namespace", "store_value"]
    restoring = data.get("invalidated") is False and locked.invalidated_at is not None
    if data.get("invalidated") is True and locked.invalidated_at is None:
        locked.invalidated_at = timezone.now()
        changed.append("invalidated_at")
        _event(locked, MemoryEvent.Kind.FACT_INVALIDATED, reason="removed")
    if restoring:
        locked.invalidated_at, locked.invalidated_by = None, None
        changed += ["invalidated_at", "invalidated_by"]
    if locked.invalidated_at is None:
        subject_predicate_lock(
            team_id=locked.team_id,
            scope=locked.scope_key,
            subject_norm=locked.subject_norm,
            predicate_norm=locked.predicate_norm,
        )
    try:
        with transaction.atomic():
            locked.save(update_fields=[*changed, "updated_at"])
    except IntegrityError as exc:
        raise Conflict(
            "The same fact is already live in this scope.",
            fields={"invalidated" if restoring else "object": ["an identical live fact exists"]},
        ) from exc
    replaced: list[Fact] = []
    if locked.invalidated_at is None and is_single_valued(locked.predicate_norm):
        replaced = _invalidate_rivals(locked, timezone.now())
    search.index_facts(team_id=locked.team_id, facts=[locked, *replaced])
    return locked
