"""The embedded default's broker: kombu's filesystem transport, safe against half-written messages.

kombu 5.7 writes a message file in place (open, then write) and its reader decodes whatever it
finds, so a reader that lists the file between the two reads it empty, and the JSONDecodeError
stops the Celery worker for good. This transport:

- writes each message under a name every reader ignores (`<name>.writing`), then renames it
  into place: a reader sees the whole message or no file at all;
- reads defensively: a file that is empty or does not decode is left where it is while it is
  young (a producer without this transport may still be writing it), and once it is older than
  `unreadable_grace` seconds it is moved to `quarantine_folder` with a warning. It never stops the
  worker and is never deleted; the job it carried is a database row that its sweeper sends again.

It also waits for messages in single polls that end early once the worker is asked to stop
(kombu's idle wait ran the worker loop's whole 2 s before the worker looked at a stop request), and
polls every POLL_SECONDS rather than kombu's 1 s, so an idle worker takes a job sooner.

Chosen by `broker_transport` ("memsite.filesystem_broker:Transport") beside the `filesystem://`
URL (memsite/settings.py). Its transport options are kombu's plus `quarantine_folder` and
`unreadable_grace`.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from functools import cached_property
from pathlib import Path
from queue import Empty
from typing import Any

from celery.worker import state as worker_state
from kombu import Connection
from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.json import dumps, loads

logger = logging.getLogger(__name__)

# Readers only take names ending in ".<queue>.msg" (kombu's own reader too), so a file under this
# suffix stays invisible until it is complete and renamed.
WRITING_SUFFIX = ".writing"
DEFAULT_UNREADABLE_GRACE = 5.0
# A `.writing` file this old belongs to a producer that died before its rename: that send failed
# (its job is re-sent by the sweeper), and the file is set aside rather than left in the queue folder.
ABANDONED_WRITE_AFTER = 60.0


# How often an idle worker lists its queue folders for a new message (kombu's default: 1 s). A job
# sent to an idle worker waits half of it on average; a listing of a few folders costs microseconds.
POLL_SECONDS = 0.2


def folder_options(folder: Path, poll_seconds: float = POLL_SECONDS) -> dict[str, object]:
    """The transport options of a broker kept in `folder`: its queue, control, processed and
    quarantine folders, and how often to poll them (the settings, the tests and the broker bench
    all build them here)."""
    return {
        "polling_interval": poll_seconds,
        "data_folder_in": str(folder / "queue"),
        "data_folder_out": str(folder / "queue"),
        "processed_folder": str(folder / "processed"),
        "control_folder": str(folder / "control"),
        "quarantine_folder": str(folder / "bad"),
        "store_processed": False,
    }


def write_message_file(path: Path, content: bytes) -> None:
    """Write `content` to `path` so that no other process ever sees part of it.

    The rename alone makes that so. No fsync: it would triple the cost of a send (0.93 against
    0.39 ms a send here, p99 2.8 against 0.65 ms, and an API write may send one) for a
    guarantee the embedded database does not give either (SQLite in WAL with synchronous=NORMAL
    may lose its last commits to a power cut). After one, a message file may be empty: the reader
    sets it aside and the sweeper sends again the job, if its row survived.
    """
    temporary = path.with_name(path.name + WRITING_SUFFIX)  # message names are unique already
    try:
        temporary.write_bytes(content)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def create_whole_file(path: Path, content: bytes) -> None:
    """Create `path` holding `content`, seen whole or not at all; FileExistsError when it exists
    (a hard link never overwrites, where a rename would)."""
    temporary = path.with_name(f"{path.name}.{uuid.uuid4().hex[:8]}{WRITING_SUFFIX}")
    try:
        temporary.write_bytes(content)
        os.link(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


class Channel(filesystem.Channel):
    """kombu's filesystem channel with whole-file writes and reads that set bad files aside."""

    @cached_property
    def quarantine_folder(self) -> Path:
        return Path(self.transport_options.get("quarantine_folder", "bad"))

    @cached_property
    def unreadable_grace(self) -> float:
        return float(self.transport_options.get("unreadable_grace", DEFAULT_UNREADABLE_GRACE))

    # kombu's filesystem channel narrows the virtual channel's signatures; the stubs say so too.
    def _put(self, queue: str, payload: dict[str, Any], **kwargs: Any) -> None:  # type: ignore[override]
        # kombu's name (milliseconds of the monotonic clock first: readers take the oldest first), so
        # both transports can share a folder, with the nanoseconds within that millisecond after it:
        # kombu's uuid alone leaves messages sent in the same millisecond in random order.
        now = time.monotonic_ns()
        name = f"{now // 1_000_000}_{now % 1_000_000:06d}-{uuid.uuid4()}.{queue}.msg"
        path = Path(self.data_folder_out) / name
        try:
            write_message_file(path, dumps(payload).encode())
        except OSError as exc:
            raise ChannelError(f"Cannot add file {str(path)!r} to directory") from exc

    def _get(self, queue: str) -> dict[str, Any]:  # type: ignore[override]
        message_name = f"{queue}.msg"
        for name in sorted(os.listdir(self.data_folder_in)):
            # Like kombu: what follows the first dot names the queue.
            queue_part = name.partition(".")[2]
            if queue_part == message_name:
                message = self._take(Path(self.data_folder_in) / name)
                if message is not None:
                    return message
            elif queue_part == message_name + WRITING_SUFFIX:
                self._set_aside_when_older_than(
                    Path(self.data_folder_in) / name, ABANDONED_WRITE_AFTER, "was never completed"
                )
        raise Empty()

    def _take(self, path: Path) -> dict[str, Any] | None:
        """The message in `path`, removed from the queue; None when another consumer took it
        first or when it cannot be read (then left for a later poll, or set aside when old)."""
        try:
            content = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise ChannelError(f"Cannot read file {str(path)!r} from queue.") from exc
        message = self._decoded(content)
        if message is None:
            self._set_aside_when_older_than(path, self.unreadable_grace, "cannot be decoded")
            return None
        # Read first, claim second: removing the file is the claim, and only one consumer's
        # removal succeeds. A complete message never changes, so what was read is what was claimed.
        try:
            if self.store_processed:
                os.rename(path, Path(self.processed_folder) / path.name)
            else:
                path.unlink()
        except FileNotFoundError:
            return None
        return message

    def _decoded(self, content: bytes) -> dict[str, Any] | None:
        """The message, or None when `content` is not one whole message as kombu writes it."""
        try:
            message = loads(content.decode("utf-8"))
            if not isinstance(message, dict) or not isinstance(message.get("properties"), dict):
                return None
            properties = message["properties"]
            if "delivery_tag" not in properties or not isinstance(properties.get("delivery_info"), dict):
                return None
            if message.get("body"):
                # The consumer decodes the body again; a body that fails here would fail there,
                # inside the worker's event loop.
                self.decode_body(message["body"], properties.get("body_encoding"))
        except Exception:  # any way a file can fail to decode must leave the worker running
            return None
        return message

    def _set_aside_when_older_than(self, path: Path, age_limit: float, problem: str) -> None:
        try:
            age = time.time() - path.stat().st_mtime
        except FileNotFoundError:
            return
        if age < age_limit:
            return  # its producer may still be writing it
        self.quarantine_folder.mkdir(parents=True, exist_ok=True)
        target = self.quarantine_folder / path.name
        if target.exists():
            target = target.with_name(f"{path.name}.{uuid.uuid4().hex[:8]}")
        try:
            os.rename(path, target)
        except FileNotFoundError:
            return  # another consumer set it aside first
        logger.warning(
            "Broker file %s %s after %.0f s; moved to %s. The job it carried, if any, is sent again by its sweeper.",
            path.name,
            problem,
            age,
            target,
        )

    def _queue_bind(self, exchange: str, routing_key: str, pattern: str | None, queue: str) -> None:
        """kombu creates a missing exchange table by opening it for writing before it locks it, so a
        reader can read it empty and fail to decode it; a missing table is created whole here."""
        # kombu's own path check (it refuses names that would leave the control folder); not in the stubs.
        table: Path = self._exchange_file(exchange)  # type: ignore[attr-defined]
        if not table.exists():
            self.control_folder.mkdir(parents=True, exist_ok=True)
            entry = filesystem.exchange_queue_t(routing_key or "", pattern or "", queue or "")
            try:
                create_whole_file(table, dumps([entry]).encode())
                return
            except FileExistsError:
                pass  # another process created it meanwhile: kombu adds this binding to it
        super()._queue_bind(exchange, routing_key, pattern, queue)


class Transport(filesystem.Transport):
    Channel = Channel

    # kombu-stubs give the base transport a **kwargs signature its own virtual transport overrides too.
    def drain_events(self, connection: Connection, timeout: float | None = None) -> None:  # type: ignore[override]
        """Deliver one message, waiting up to `timeout` (None: for ever) in polls `polling_interval`
        apart, as kombu's virtual transport does, but stop waiting once the worker has been asked to
        stop: its loop asks for 2 s of events and only looks at a stop request between two asks, so
        a stopping worker (SIGTERM, Ctrl-C under `make run`) sat idle for up to 3 s."""
        poll = float(self.polling_interval or POLL_SECONDS)
        started = time.monotonic()
        while True:
            try:
                self.cycle.get(self._deliver, timeout=timeout)  # type: ignore[union-attr]
                return
            except Empty:
                pass
            waited = time.monotonic() - started
            if _worker_stopping() or (timeout is not None and waited >= timeout):
                raise TimeoutError()
            time.sleep(poll if timeout is None else min(poll, timeout - waited))


def _worker_stopping() -> bool:
    """Whether this process is a Celery worker asked to stop, warm or cold (its signal handlers set
    these; they are None in any other process)."""
    return worker_state.should_stop is not None or worker_state.should_terminate is not None
