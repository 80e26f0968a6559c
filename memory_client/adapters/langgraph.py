"""A LangGraph `BaseStore` over memsite's facts: long-term memory that the team's recall finds too.

    from memory_client.adapters.langgraph import MemsiteStore

    graph = builder.compile(store=MemsiteStore())  # MEMSITE_URL / MEMSITE_API_KEY

A stored item is a fact of one memsite session, named by `session_id` (its external_id, default
"langgraph-store"), so a store's items never mix with facts extracted from conversations: subject =
the namespace joined with "." (LangGraph refuses "." inside a label), predicate = the key, object =
the value as JSON. Every operation runs on the server (POST /api/v1/store/batch/): a batch is one
request (or one per 200 operations), and concurrent async calls are sent together.

- Namespaces and keys are kept exactly as given: ("Foo",) and ("foo",) are two namespaces.
- put: a new fact that supersedes the key's live value (invalidated, kept with when it stopped
  being valid), never an overwrite; `history()` lists them all. A put of the value the key holds
  counts it seen again. delete (put with value None) supersedes the value with a deletion marker.
- search: the live items under the namespace prefix that pass `filter` (LangGraph's filters: equality,
  nested objects, dotted keys as paths, $eq $ne $gt $gte $lt $lte), newest first, paged by the
  database. With a `query`, the items memsite's hybrid search ranks (full text and vectors) come
  first, best first, with their score; the other matching items follow, newest first, score None.
- list_namespaces: prefix/suffix conditions with "*" wildcards, max_depth, limit, offset.

What facts imply: a value (its JSON) holds at most 1000 characters, a namespace at most 600 with its
separators; a page at most 1000 items. `index` is ignored: memsite indexes every item (its
subject, predicate and object) itself. TTLs are not supported (`supports_ttl = False`, as in
LangGraph's own base class). Concurrent async operations sent together succeed or fail together.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
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

from memory_client.adapters._sessions import NamedSession
from memory_client.errors import ApiError
from memory_client.transport import DEFAULT_RETRIES, DEFAULT_TIMEOUT, HttpApi

DEFAULT_SESSION = "langgraph-store"
OPS_PER_REQUEST = 200  # a request each, well within the default timeout (the server takes up to 1000)
MAX_PAGE = 1000  # the server's largest search or listing page


def _subject(namespace: tuple[str, ...]) -> str:
    return ".".join(namespace)


def _time(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def _item(row: dict[str, Any]) -> Item:
    return Item(
        value=row["value"],
        key=row["key"],
        namespace=tuple(row["namespace"]),
        created_at=_time(row["created_at"]),
        updated_at=_time(row["updated_at"]),
    )


def _search_item(row: dict[str, Any]) -> SearchItem:
    return SearchItem(
        namespace=tuple(row["namespace"]),
        key=row["key"],
        value=row["value"],
        created_at=_time(row["created_at"]),
        updated_at=_time(row["updated_at"]),
        score=row["score"],
    )


def _conditions(op: ListNamespacesOp) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for condition in op.match_conditions or ():
        if condition.match_type in found:
            raise ValueError(f"memsite lists namespaces with at most one {condition.match_type} condition")
        found[condition.match_type] = list(condition.path)
    return found


def _wire(op: Op) -> dict[str, Any]:
    """The operation as the store batch takes it (POST /api/v1/store/batch/)."""
    if isinstance(op, GetOp):
        return {"op": "get", "namespace": list(op.namespace), "key": op.key}
    if isinstance(op, PutOp):
        return {"op": "put", "namespace": list(op.namespace), "key": op.key, "value": op.value}
    if isinstance(op, SearchOp):
        return {
            "op": "search",
            "namespace_prefix": list(op.namespace_prefix),
            "filter": op.filter,
            "query": op.query,
            "limit": min(max(op.limit, 0), MAX_PAGE),
            "offset": max(op.offset, 0),
        }
    if isinstance(op, ListNamespacesOp):
        return {
            "op": "list_namespaces",
            **_conditions(op),
            "max_depth": op.max_depth,
            "limit": min(max(op.limit, 0), MAX_PAGE),
            "offset": max(op.offset, 0),
        }
    raise TypeError(f"Unknown store operation: {op!r}")


def _result(op: Op, answer: Any) -> Result:
    if isinstance(op, GetOp):
        return _item(answer) if answer is not None else None
    if isinstance(op, SearchOp):
        return [_search_item(row) for row in answer]
    if isinstance(op, ListNamespacesOp):
        return [tuple(namespace) for namespace in answer]
    return None


def _nothing_stored(op: Op) -> Result:
    """An operation's result on a store whose session does not exist yet."""
    return [] if isinstance(op, (SearchOp, ListNamespacesOp)) else None


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
        # Async operations waiting to be sent, by event loop: those queued in one turn of the loop go together.
        self._queued: dict[asyncio.AbstractEventLoop, list[tuple[list[Op], asyncio.Future[list[Result]]]]] = {}
        self._sending: set[asyncio.Task[None]] = set()  # strong references: the loop keeps only weak ones

    def close(self) -> None:
        self._api.close()

    # --- BaseStore --------------------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the operations in order on the server (a put is visible to the operations after it)."""
        ops = list(ops)
        for op in ops:
            validate_op_namespace(op)
            _wire(op)  # refuse an operation the server cannot take before sending any
        writes = any(isinstance(op, PutOp) and op.value is not None for op in ops)
        session_id = self._session.id(create=writes)
        if session_id is None:
            return [_nothing_stored(op) for op in ops]
        results: list[Result] = []
        refused: list[str] = []
        for start in range(0, len(ops), OPS_PER_REQUEST):
            chunk = ops[start : start + OPS_PER_REQUEST]
            for op, answer in zip(chunk, self._send(session_id, chunk), strict=True):
                if isinstance(op, PutOp) and answer is not None:
                    refused.append(f"{op.namespace}/{op.key}")
                results.append(_result(op, answer))
        if refused:
            # memsite kept the curated values and filed these for an admin's review.
            raise PermissionError(f"{', '.join(refused)} holds a curated value; only an admin key can replace it")
        return results

    def _send(self, session_id: str, ops: Sequence[Op]) -> list[Any]:
        body = {"session": session_id, "role": self.role, "ops": [_wire(op) for op in ops]}
        try:
            # A retry of a lost answer puts the same values again: they are counted seen, not stored twice.
            answer = self._api.request("POST", "store/batch/", json_body=body, idempotent=True, expect=(200,))
        except ApiError as exc:
            if exc.status_code == 400 and exc.fields:
                raise ValueError(f"memsite refused the store operations: {exc.fields}") from exc
            raise
        return list(answer.json()["results"])

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """`batch` in a worker thread; operations queued by concurrent tasks in the same turn of the
        event loop go to the server in one batch (LangGraph sends each aget/aput as its own batch)."""
        ops = list(ops)
        for op in ops:
            validate_op_namespace(op)  # before queueing: a bad operation would fail its neighbours
            _wire(op)
        loop = asyncio.get_running_loop()
        done: asyncio.Future[list[Result]] = loop.create_future()
        queued = self._queued.setdefault(loop, [])
        queued.append((ops, done))
        if len(queued) == 1:
            # call_soon runs after the tasks already scheduled in this turn have queued theirs.
            loop.call_soon(lambda: self._sending.add(loop.create_task(self._send_queued(loop))))
        return await done

    async def _send_queued(self, loop: asyncio.AbstractEventLoop) -> None:
        waiting = self._queued.pop(loop, [])
        try:
            results = await asyncio.to_thread(self.batch, [op for ops, _ in waiting for op in ops])
        except Exception as exc:  # every caller of the batch gets its failure
            for _, done in waiting:
                if not done.done():
                    done.set_exception(exc)
        else:
            start = 0
            for ops, done in waiting:
                if not done.done():
                    done.set_result(results[start : start + len(ops)])
                start += len(ops)
        finally:
            self._sending.discard(asyncio.current_task())

    def history(self, namespace: tuple[str, ...], key: str) -> list[dict[str, Any]]:
        """Every value the key has had, newest first, as memsite's facts (invalidated ones included).

        Each has `object` (the value's JSON, or "null" for a deletion), `valid_from` and
        `invalidated_at`; memsite's `as_of` reads answer what the store held at any time.
        """
        session_id = self._session.id(create=False)
        if session_id is None:
            return []
        query = {"session": session_id, "subject": _subject(namespace), "predicate": key}
        facts: list[dict[str, Any]] = []
        offset = 0
        while True:  # the fact list matches terms case-insensitively: keep the exact namespace and key
            page = self._api.get("facts/", include_invalidated="true", limit=500, offset=offset, **query)
            facts += [f for f in page["results"] if f["subject"] == _subject(namespace) and f["predicate"] == key]
            if not page.get("next"):
                return facts
            offset += 500
