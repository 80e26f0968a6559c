"""The write path of the context ledger: one `ContextServe` row per context served, in batches.

A context read is on every agent turn. Writing its ledger row in the request (an INSERT with its
commit flush, two foreign-key checks and three index updates) cost ~0.8 ms of a ~4 ms request
and took the context endpoint from 0.72 to 0.46 of the API bench's read floor. So each web
process keeps the rows it served and writes them with one bulk INSERT: a background thread
every `CONTEXT_LEDGER_FLUSH_SECONDS`, the request that fills a batch of `BATCH_ROWS`, and
`atexit` on the way out (a gunicorn worker stopping gracefully exits through SystemExit, so
its atexit handlers run).

What this trades: the usage figures lag by up to one interval, and a process killed with
SIGKILL loses the rows it held (at most one interval's). The ledger is accounting, not
acknowledged data; messages are never written this way. Rows of a session deleted before they
were written are dropped, so a deletion still leaves no trace. With the interval at 0 (the
tests), every row is written in its request.

A row may come with its `ContextRecord` (the replay of what was served), written in the same
transaction. Its id is chosen when the context is served, so the answer can name it before the
batch is written: `holds` tells the replay read that this process has it still, and `flush`
then writes it. The record's payload is compressed when it is saved, in the flusher thread.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time

from django.conf import settings
from django.db import DatabaseError, IntegrityError, connections, transaction

from memory_app.conversations.models import Session
from memory_app.usage.models import ContextRecord, ContextServe

log = logging.getLogger(__name__)
BATCH_ROWS = 200
# Rows kept for the next attempt when the database refuses a batch (an outage); beyond that
# the oldest go, so an outage cannot grow a web process without bound.
MAX_HELD_ROWS = 20_000
# A replay record holds a whole context (tens of kB uncompressed, not ~100 bytes): through an
# outage only the newest this many keep theirs; older rows are still written, without replay.
MAX_HELD_RECORDS = 1_000

Held = tuple[ContextServe, ContextRecord | None]

_lock = threading.Lock()
_rows: list[Held] = []
_flusher: threading.Thread | None = None


def record(row: ContextServe, replay: ContextRecord | None = None) -> None:
    """Keep one unsaved row (and its replay record) for the next batch, or save them now when
    batching is off."""
    interval = settings.CONTEXT_LEDGER_FLUSH_SECONDS
    if interval <= 0:
        with transaction.atomic():
            row.save()  # the session was read in this request: nothing to check
            if replay is not None:
                replay.save(force_insert=True)
        return
    with _lock:
        _rows.append((row, replay))
        full = len(_rows) >= BATCH_ROWS
        _start_flusher()
    if full:
        flush()


def holds(context_id: object) -> bool:
    """Whether this process holds the served context `context_id`, not written yet."""
    with _lock:
        return any(row.context_id == context_id for row, _ in _rows)


def flush() -> int:
    """Write every row this process holds; the number written. A database error keeps them."""
    with _lock:
        rows = _rows[:]
        _rows.clear()
    if not rows:
        return 0
    try:
        return _write(rows)
    except IntegrityError:
        log.exception("context ledger: %d rows refused by the database, dropped", len(rows))
        return 0
    except DatabaseError as exc:
        log.warning("context ledger: %d rows kept for the next flush: %s", len(rows), exc)
        with _lock:
            _rows[:0] = rows
            del _rows[: max(0, len(_rows) - MAX_HELD_ROWS)]
            _drop_old_records()
        return 0


def _drop_old_records() -> None:
    """Keep the replay records of the newest MAX_HELD_RECORDS held rows only (caller holds the lock)."""
    for index in range(max(0, len(_rows) - MAX_HELD_RECORDS)):
        row, replay = _rows[index]
        if replay is not None:
            _rows[index] = (row, None)


def pending() -> int:
    with _lock:
        return len(_rows)


def _write(rows: list[Held]) -> int:
    try:
        return _insert_live(rows)
    except IntegrityError:
        # The session check and the insert are two statements: a session deleted in between
        # fails the insert on its foreign key. Check again.
        return _insert_live(rows)


def _insert_live(rows: list[Held]) -> int:
    """Insert the rows whose session still exists: a deleted session must not get one back."""
    live = set(Session.objects.filter(pk__in={row.session_id for row, _ in rows}).values_list("pk", flat=True))
    kept = [(row, replay) for row, replay in rows if row.session_id in live]
    with transaction.atomic():
        ContextServe.objects.bulk_create([row for row, _ in kept])
        # After their ledger rows: a record's key is its row's context_id.
        ContextRecord.objects.bulk_create([replay for _, replay in kept if replay is not None])
    return len(kept)


def _start_flusher() -> None:
    """Start this process's flusher thread once (the caller holds the lock)."""
    global _flusher
    if _flusher is None:
        _flusher = threading.Thread(target=_flush_every, name="context-ledger", daemon=True)
        _flusher.start()


def _flush_every() -> None:
    # The interval is read on every tick, after the sleep, so a changed setting applies within a
    # second: deciding with the value read before the sleep flushed rows a second after batching
    # had been turned on for an hour.
    last = time.monotonic()
    interval = settings.CONTEXT_LEDGER_FLUSH_SECONDS
    while True:
        time.sleep(min(interval, 1.0) if interval > 0 else 1.0)
        interval = settings.CONTEXT_LEDGER_FLUSH_SECONDS
        if time.monotonic() - last < interval:
            continue
        last = time.monotonic()
        try:
            flush()
        except Exception:  # the thread must outlive any one failure
            log.exception("context ledger flush failed")
        finally:
            # This thread's own connection (connections are per thread): not held idle between
            # batches, and a fresh one next time survives a database restart.
            connections.close_all()


def _after_fork() -> None:
    # A forked child does not inherit the parent's thread (nor a lock it held); it must not
    # write the parent's rows.
    global _flusher, _lock
    _lock = threading.Lock()
    _rows.clear()
    _flusher = None


os.register_at_fork(after_in_child=_after_fork)
atexit.register(flush)
