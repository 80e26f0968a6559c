"""Writes of a store, and the batch that runs a LangGraph batch of operations in one request.

A put is a new fact that supersedes the key's live one (invalidated, kept with when it stopped
being valid), never an overwrite; a delete is a deletion marker (store_value null) superseding it.
The item's identity is its namespace and key exactly as given: ("Foo",) and ("foo",) are two
namespaces, though their facts' normalised subjects are equal (the fact_key of a store fact is
made from the exact namespace, key and value, so the live-fact constraint keeps them apart too).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from memory_app.conversations.models import Session
from memory_app.events.models import MemoryEvent
from memory_app.events.services import event_record
from memory_app.facts.locks import subject_predicate_lock
from memory_app.facts.models import Fact
from memory_app.facts.output import normalize_term
from memory_app.facts.selectors import term_key
from memory_app.search import services as search
from memory_app.store import selectors

EXTRACTOR = "langgraph-store"
DELETED = "null"  # the object of a deletion marker: a stored value is always a JSON object


@dataclass(frozen=True)
class PutOutcome:
    """What a put did: `kept` is False when the key holds a curated value only an admin may replace
    (the new value is kept invalidated by it, for an admin to review); `changed` are the facts the
    search index must learn (the new one and the one it superseded)."""

    kept: bool
    changed: list[Fact] = field(default_factory=list)


def value_text(value: Mapping[str, Any]) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _store_fact_key(namespace: str, key: str, text: str) -> str:
    return hashlib.sha256("\x1f".join(("store", namespace, key, text)).encode()).hexdigest()


def _create(*, session: Session, role: str, namespace: str, key: str, text: str, now: datetime, curated: bool) -> Fact:
    subject_norm, predicate_norm, object_norm = normalize_term(namespace), normalize_term(key), normalize_term(text)
    return Fact.objects.create(
        team_id=session.team_id,
        session=session,
        scope_key=str(session.pk),
        role=role,
        subject=namespace,
        predicate=key,
        object=text,
        subject_norm=subject_norm,
        predicate_norm=predicate_norm,
        object_norm=object_norm,
        fact_key=_store_fact_key(namespace, key, text),
        subject_key=term_key(subject_norm),
        object_key=term_key(object_norm),
        extractor=EXTRACTOR,
        curated=curated,
        valid_from=now,
        store_namespace=namespace,
        store_value=None if text == DELETED else json.loads(text),
    )


def _invalidate(fact: Fact, *, by: Fact, session: Session, now: datetime, reason: str) -> None:
    fact.invalidated_at, fact.invalidated_by = now, by
    fact.save(update_fields=["invalidated_at", "invalidated_by", "updated_at"])
    event_record(
        team_id=fact.team_id,
        session=session,  # the store's: not read again through the fact
        kind=MemoryEvent.Kind.FACT_INVALIDATED,
        data={"fact_id": str(fact.pk), "reason": reason, "invalidated_by": str(by.pk)},
    )


def store_put(
    *,
    session: Session,
    role: str,
    namespace: Sequence[str],
    key: str,
    value: Mapping[str, Any] | None,
    curated: bool,
    known: dict[tuple[str, str], Fact | None] | None = None,
) -> PutOutcome:
    """Put the value (None deletes), superseding the key's live value; call inside a transaction,
    then index `changed` (store_batch indexes a batch's puts together).

    The same value put again is seen again (times_seen + 1, updated_at now), not stored twice; a
    delete of a key without a value writes nothing. Takes the key's (subject, predicate) lock
    (facts.locks) first, so two writers of one key leave one live value; while the transaction holds
    it, `known` (the batch's) remembers the key's live fact for the operations after this one.
    """
    text_namespace = selectors.namespace_text(namespace)
    scope = str(session.pk)
    subject_predicate_lock(
        team_id=session.team_id, scope=scope, subject_norm=normalize_term(text_namespace), predicate_norm=key
    )
    known = {} if known is None else known
    if (text_namespace, key) in known:
        live = known[(text_namespace, key)]
    else:
        live = selectors.live_fact(session=session, namespace=namespace, key=key)
    text = DELETED if value is None else value_text(value)
    now = timezone.now()
    known[(text_namespace, key)] = live
    if (live is None and value is None) or (live is not None and live.object == text):
        if live is not None:
            Fact.objects.filter(pk=live.pk).update(times_seen=F("times_seen") + 1, updated_at=now)
            live.times_seen, live.updated_at = live.times_seen + 1, now
        return PutOutcome(kept=True)
    fact = _create(session=session, role=role, namespace=text_namespace, key=key, text=text, now=now, curated=curated)
    if live is not None and live.curated and not curated:
        _invalidate(fact, by=live, session=session, now=now, reason="contradicts_curated")
        return PutOutcome(kept=False, changed=[fact])
    known[(text_namespace, key)] = fact
    if live is None:
        return PutOutcome(kept=True, changed=[fact])
    _invalidate(live, by=fact, session=session, now=now, reason="replaced")
    return PutOutcome(kept=True, changed=[fact, live])


class _Batch:
    """One batch's run: the facts its puts changed are indexed together, before a query search
    (which ranks through the index) and at the end."""

    def __init__(self, *, session: Session, role: str, curated: bool) -> None:
        self.session, self.role, self.curated = session, role, curated
        self.unindexed: dict[Any, Fact] = {}
        self.known: dict[tuple[str, str], Fact | None] = {}  # the live fact of each key this batch put

    def index(self) -> None:
        if self.unindexed:
            search.index_facts(team_id=self.session.team_id, facts=list(self.unindexed.values()))
            self.unindexed.clear()

    def run(self, op: Mapping[str, Any]) -> Any:
        if op["op"] == "put":
            outcome = store_put(
                session=self.session,
                role=self.role,
                namespace=op["namespace"],
                key=op["key"],
                value=op["value"],
                curated=self.curated,
                known=self.known,
            )
            self.unindexed.update((fact.pk, fact) for fact in outcome.changed)  # its latest state wins
            return None if outcome.kept else {"kept": False, "reason": "curated"}
        if op["op"] == "search" and op.get("query"):
            self.index()
        if op["op"] == "get" and (key := (selectors.namespace_text(op["namespace"]), op["key"])) in self.known:
            live = self.known[key]
            return selectors.item_dict(live) if live is not None and live.store_value is not None else None
        return _read(op, session=self.session)


def _read(op: Mapping[str, Any], *, session: Session) -> Any:
    kind = op["op"]
    if kind == "get":
        return selectors.store_get(session=session, namespace=op["namespace"], key=op["key"])
    if kind == "search":
        return selectors.store_search(
            session=session,
            namespace_prefix=op["namespace_prefix"],
            value_filter=op.get("filter"),
            limit=op["limit"],
            offset=op["offset"],
            query=op.get("query"),
        )
    return selectors.store_list_namespaces(
        session=session,
        prefix=op.get("prefix"),
        suffix=op.get("suffix"),
        max_depth=op.get("max_depth"),
        limit=op["limit"],
        offset=op["offset"],
    )


def store_batch(*, session: Session, role: str, ops: Sequence[Mapping[str, Any]], curated: bool) -> list[Any]:
    """Run validated operations in order, each seeing the writes before it; one result each.

    A batch with a put is one transaction (all or nothing); a batch that only reads takes no write
    lock (SQLite's transactions take it at BEGIN).
    """
    run = _Batch(session=session, role=role, curated=curated)
    if not any(op["op"] == "put" for op in ops):
        return [run.run(op) for op in ops]
    with transaction.atomic():
        results = [run.run(op) for op in ops]
        run.index()
        return results
