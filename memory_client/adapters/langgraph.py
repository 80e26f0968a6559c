"""A LangGraph `BaseStore` over memsite's facts: long-term memory that the team's recall finds too.

    from memory_client.adapters.langgraph import MemsiteStore

    graph = builder.compile(store=MemsiteStore())  # MEMSITE_URL / MEMSITE_API_KEY

A stored item is a fact: subject = the namespace joined with "." (LangGraph refuses "." inside a
label, so the join is unambiguous), predicate = the key, object = the value as JSON. The facts
belong to one memsite session, named by `session_id` (its external_id, default
"langgraph-store"), so a store's items never mix with facts extracted from conversations, and
searches are narrowed to them on the server.

- put: a new fact posted with `replaces`, so the previous value of the key is invalidated
  (kept, with when it stopped being valid), never overwritten; `history()` lists them all.
- delete (put with value None): the live value is superseded by a deletion marker (object
  `null`), which every read skips. Invalidating a fact outright is an admin's act in memsite;
  the marker needs only the write key an agent has.
- search with `query`: memsite's hybrid search (POST /api/v1/search/, full text and vectors,
  kind `fact`, this store's session), ranked by the server; without one, newest first. `filter`
  matches values as LangGraph's own stores do (equality, nested dicts, $eq $ne $gt $gte $lt $lte).
- list_namespaces: prefix/suffix conditions with "*" wildcards, max_depth, limit, offset.

What facts imply: namespaces and keys are matched as memsite matches fact terms (Unicode NFKC,
case-insensitive, whitespace collapsed), so ("Users",) and ("users",) are one namespace (list_namespaces
conditions compare labels exactly, as LangGraph's stores do); a value
(its JSON) holds at most 1000 characters; a put of a value equal to the stored one up to letter
case or spacing keeps the stored one. A search with a query ranks at most the best 50 facts of
the store. `index` is ignored: memsite indexes every fact (subject, predicate and object) itself;
TTLs are not supported (`supports_ttl = False`, as in LangGraph's own base class).
"""

from __future__ import annotations

import asyncio
import json
import unicodedata
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime
from typing import Any

import httpx
from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    validate_op_namespace,
)

# LangGraph's own matching, so filters and namespace conditions mean what they mean in its stores.
from langgraph.store.memory import _compare_values, _does_match

from memory_client.adapters._sessions import NamedSession
from memory_client.errors import ApiError
from memory_client.search import MAX_LIMIT, search_body, search_hits
from memory_client.transport import DEFAULT_RETRIES, DEFAULT_TIMEOUT, HttpApi

DEFAULT_SESSION = "langgraph-store"
DELETED = "null"  # the object of a deletion marker: a value is always a JSON object, never null
_PAGE = 500  # the fact list's largest page


def _norm(term: str) -> str:
    """A term as memsite compares fact terms (memory_app.facts.output.normalize_term)."""
    return " ".join(unicodedata.normalize("NFKC", term).casefold().split())


def _subject(namespace: tuple[str, ...]) -> str:
    return ".".join(namespace)


def _value_text(value: Mapping[str, Any]) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _time(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def _item(fact: Mapping[str, Any]) -> Item | None:
    """The item a live fact of the store holds; None for a deletion marker or a fact not written as one."""
    try:
        value = json.loads(fact["object"])
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    return Item(
        value=value,
        key=fact["predicate"],
        namespace=tuple(fact["subject"].split(".")),
        created_at=_time(fact["valid_from"]),
        updated_at=_time(fact["updated_at"]),
    )


def _under(namespace: tuple[str, ...], prefix: tuple[str, ...]) -> bool:
    return len(namespace) >= len(prefix) and all(
        _norm(label) == _norm(wanted) for label, wanted in zip(namespace, prefix, strict=False)
    )


def _matches(item: Item, op: SearchOp) -> bool:
    if not _under(item.namespace, op.namespace_prefix):
        return False
    return all(_compare_values(item.value.get(key), wanted) for key, wanted in (op.filter or {}).items())


class MemsiteStore(BaseStore):
    """LangGraph's BaseStore over the facts of one memsite session (see the module docstring).

    `role` is who states the facts (shown with them in memsite, and a search filter).
    """

    supports_ttl = False

    def __init__(
        self,
        session_id: str = DEFAULT_SESSION,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        role: str = "langgraph",
        timeout: float | httpx.Timeout = DEFAULT_TIMEOUT,
        max_retries: int = DEFAULT_RETRIES,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.role = role
        self._api = HttpApi(
            base_url=base_url, api_key=api_key, timeout=timeout, max_retries=max_retries, transport=transport
        )
        self._session = NamedSession(self._api, session_id)

    def close(self) -> None:
        self._api.close()

    # --- BaseStore --------------------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the operations in order (a put is visible to the operations after it)."""
        ops = list(ops)
        for op in ops:
            validate_op_namespace(op)
        return [self._run(op) for op in ops]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """`batch` in a worker thread: the event loop never waits on HTTP."""
        return await asyncio.to_thread(self.batch, list(ops))

    def history(self, namespace: tuple[str, ...], key: str) -> list[dict[str, Any]]:
        """Every value the key has had, newest first, as memsite's facts (invalidated ones included).

        Each has `object` (the value's JSON, or "null" for a deletion), `valid_from` and
        `invalidated_at`; memsite's `as_of` reads answer what the store held at any time.
        """
        session_id = self._session.id(create=False)
        if session_id is None:
            return []
        query = {"subject": _subject(namespace), "predicate": key, "include_invalidated": "true"}
        return list(self._facts(session_id, query))

    # --- the operations ---------------------------------------------------------------------------

    def _run(self, op: Op) -> Result:
        if isinstance(op, GetOp):
            return self._get(op.namespace, op.key)
        if isinstance(op, PutOp):
            self._put(op)
            return None
        if isinstance(op, SearchOp):
            return self._search(op)
        if isinstance(op, ListNamespacesOp):
            return self._list_namespaces(op)
        raise TypeError(f"Unknown store operation: {op!r}")

    def _facts(self, session_id: str, query: dict[str, Any]) -> Iterator[dict[str, Any]]:
        """The store's facts matching the query, newest first, page after page."""
        offset = 0
        while True:
            page = self._api.get("facts/", session=session_id, limit=_PAGE, offset=offset, **query)
            yield from page["results"]
            if not page.get("next"):
                return
            offset += _PAGE

    def _live_fact(self, session_id: str, namespace: tuple[str, ...], key: str) -> dict[str, Any] | None:
        query = {"subject": _subject(namespace), "predicate": key, "limit": 1}
        found = self._api.get("facts/", session=session_id, **query)["results"]
        return found[0] if found else None

    def _get(self, namespace: tuple[str, ...], key: str) -> Item | None:
        session_id = self._session.id(create=False)
        if session_id is None:
            return None
        fact = self._live_fact(session_id, namespace, key)
        return _item(fact) if fact is not None else None

    def _put(self, op: PutOp) -> None:
        if op.value is None:
            session_id = self._session.id(create=False)
            live = self._live_fact(session_id, op.namespace, op.key) if session_id is not None else None
            if live is None or live["object"] == DELETED:
                return  # nothing to delete: no marker for a key that never held a value
            self._add_fact(op.namespace, op.key, DELETED)
            return
        self._add_fact(op.namespace, op.key, _value_text(op.value))

    def _add_fact(self, namespace: tuple[str, ...], key: str, text: str) -> None:
        body = {
            "role": self.role,
            "subject": _subject(namespace),
            "predicate": key,
            "object": text,
            "session": self._session.id(create=True),
            "replaces": True,
        }
        try:
            # A retry of a lost answer finds the fact live and counts it seen again: stored once.
            fact = self._api.request("POST", "facts/", json_body=body, idempotent=True, expect=(200, 201)).json()
        except ApiError as exc:
            if exc.status_code == 400 and exc.fields:
                raise ValueError(f"memsite refused {namespace}/{key}: {exc.fields}") from exc
            raise
        if fact["invalidated_at"] is not None:
            # The key's value was curated by an admin: memsite keeps it and files this one for review.
            raise PermissionError(f"{namespace}/{key} holds a curated value; only an admin key can replace it")

    def _candidates(self, session_id: str, prefix: tuple[str, ...]) -> dict[str, Item]:
        """The live items under the prefix, by fact id, newest first."""
        # `q` narrows on the server to facts whose terms contain the prefix; _under checks it exactly.
        query = {"q": _subject(prefix)} if prefix else {}
        items = ((fact["id"], _item(fact)) for fact in self._facts(session_id, query))
        return {fact_id: item for fact_id, item in items if item is not None}

    def _search(self, op: SearchOp) -> list[SearchItem]:
        session_id = self._session.id(create=False)
        if session_id is None or op.limit <= 0:
            return []
        candidates = self._candidates(session_id, op.namespace_prefix)
        found = {fact_id: item for fact_id, item in candidates.items() if _matches(item, op)}
        if not op.query:
            return [_search_item(item, None) for item in list(found.values())[op.offset : op.offset + op.limit]]
        body = search_body(op.query, kinds=["fact"], session=session_id, limit=MAX_LIMIT)
        ranked: dict[str, SearchItem] = {}
        for hit in search_hits(self._api, body):  # best first; a long fact may be several hits
            fact_id = (hit.get("source") or {}).get("fact_id")
            if fact_id in found and fact_id not in ranked:
                ranked[fact_id] = _search_item(found[fact_id], hit.get("score"))
        return list(ranked.values())[op.offset : op.offset + op.limit]

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        session_id = self._session.id(create=False)
        if session_id is None:
            return []
        namespaces: dict[tuple[str, ...], None] = {}
        for item in self._candidates(session_id, ()).values():
            namespace = item.namespace
            if all(_does_match(condition, namespace) for condition in op.match_conditions or ()):
                namespaces.setdefault(namespace[: op.max_depth] if op.max_depth is not None else namespace, None)
        return sorted(namespaces)[op.offset : op.offset + op.limit]


def _search_item(item: Item, score: float | None) -> SearchItem:
    return SearchItem(
        namespace=item.namespace,
        key=item.key,
        value=item.value,
        created_at=item.created_at,
        updated_at=item.updated_at,
        score=score,
    )
