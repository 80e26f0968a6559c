"""The embedded broker's transport (memsite/filesystem_broker.py) on a broker folder of each test's
own: whole-file writes, and reads that skip and then set aside what they cannot decode."""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from celery.worker import state as worker_state
from kombu import Connection, Consumer, Exchange, Producer, Queue
from kombu.transport.virtual import Channel

from memsite import filesystem_broker
from memsite.filesystem_broker import folder_options

TRANSPORT = "memsite.filesystem_broker:Transport"
GRACE = 5.0


def options(folder: Path) -> dict[str, object]:
    return {**folder_options(folder), "unreadable_grace": GRACE}


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    for name in ("queue", "processed", "control"):
        (tmp_path / name).mkdir()
    return tmp_path


@pytest.fixture
def connection(folder: Path) -> Iterator[Connection]:
    # kombu remembers the bindings it declared, per process: each test's folder needs them again.
    filesystem_broker.Transport.global_state.clear()
    with Connection("filesystem://", transport=TRANSPORT, transport_options=options(folder)) as conn:
        yield conn


JOBS = Queue("jobs", Exchange("jobs"), routing_key="jobs")


def publish(connection: Connection, body: dict) -> None:
    Producer(connection.default_channel).publish(body, exchange=JOBS.exchange, routing_key="jobs", declare=[JOBS])


def receive_all(connection: Connection) -> list[dict]:
    """Every message the queue delivers now, in order."""
    received: list[dict] = []
    with Consumer(connection, [JOBS], callbacks=[lambda body, message: (received.append(body), message.ack())]):
        while True:
            try:
                connection.drain_events(timeout=0.2)
            except TimeoutError:
                return received


def aged(path: Path, seconds: float) -> Path:
    past = time.time() - seconds
    os.utime(path, (past, past))
    return path


def test_a_message_is_written_whole_under_its_final_name_and_read_back(connection: Connection, folder: Path) -> None:
    publish(connection, {"n": 1})
    [written] = (folder / "queue").iterdir()
    assert written.name.endswith(".jobs.msg")
    assert json.loads(written.read_bytes())["properties"]["delivery_tag"]  # whole, not a temporary left behind
    assert receive_all(connection) == [{"n": 1}]
    assert list((folder / "queue").iterdir()) == []


def test_a_file_still_being_written_is_invisible_to_readers(connection: Connection, folder: Path) -> None:
    publish(connection, {"n": 1})  # declares the queue
    receive_all(connection)
    (folder / "queue" / f"1_x.jobs.msg{filesystem_broker.WRITING_SUFFIX}").write_bytes(b'{"body": ')
    channel: Channel = connection.default_channel
    assert channel._size("jobs") == 0
    assert receive_all(connection) == []


def test_an_empty_or_truncated_file_is_skipped_while_young_and_the_messages_after_it_still_arrive(
    connection: Connection, folder: Path
) -> None:
    empty = folder / "queue" / "0_empty.jobs.msg"
    truncated = folder / "queue" / "0_truncated.jobs.msg"
    empty.touch()
    truncated.write_bytes(b'{"body": "eyJhIjog", "content-encoding": "utf-8", "prop')
    publish(connection, {"n": 1})
    publish(connection, {"n": 2})

    assert receive_all(connection) == [{"n": 1}, {"n": 2}]
    # Young: a producer without atomic writes may still be writing them, so they stay in place.
    assert empty.exists() and truncated.exists()
    assert not (folder / "bad").exists()


def test_a_file_that_completes_within_the_grace_is_delivered(connection: Connection, folder: Path) -> None:
    publish(connection, {"n": 1})
    [message] = (folder / "queue").iterdir()
    whole = message.read_bytes()
    message.write_bytes(whole[: len(whole) // 2])  # what a reader of kombu's in-place write can see
    assert receive_all(connection) == []
    message.write_bytes(whole)
    assert receive_all(connection) == [{"n": 1}]


def test_an_unreadable_file_past_the_grace_is_moved_aside_with_a_warning(
    connection: Connection, folder: Path, caplog: pytest.LogCaptureFixture
) -> None:
    truncated = folder / "queue" / "0_truncated.jobs.msg"
    truncated.write_bytes(b'{"body": "eyJhIjog')
    aged(truncated, GRACE + 1)
    not_a_message = folder / "queue" / "0_list.jobs.msg"
    not_a_message.write_bytes(b"[1, 2]")
    aged(not_a_message, GRACE + 1)
    publish(connection, {"n": 1})

    with caplog.at_level(logging.WARNING, logger="memsite.filesystem_broker"):
        assert receive_all(connection) == [{"n": 1}]

    assert sorted(path.name for path in (folder / "bad").iterdir()) == ["0_list.jobs.msg", "0_truncated.jobs.msg"]
    assert (folder / "bad" / "0_truncated.jobs.msg").read_bytes() == b'{"body": "eyJhIjog'  # kept as it was
    assert list((folder / "queue").iterdir()) == []
    warnings = [record.getMessage() for record in caplog.records]
    assert any(
        "0_truncated.jobs.msg cannot be decoded" in line and "sent again by its sweeper" in line for line in warnings
    )


def test_a_write_abandoned_by_a_dead_producer_is_moved_aside(connection: Connection, folder: Path) -> None:
    publish(connection, {"n": 1})
    receive_all(connection)
    abandoned = folder / "queue" / f"1_x.jobs.msg{filesystem_broker.WRITING_SUFFIX}"
    abandoned.write_bytes(b'{"bo')
    aged(abandoned, filesystem_broker.ABANDONED_WRITE_AFTER + 1)
    assert receive_all(connection) == []
    assert [path.name for path in (folder / "bad").iterdir()] == [abandoned.name]


def test_it_reads_the_messages_kombus_own_transport_wrote(folder: Path, connection: Connection) -> None:
    publish(connection, {"n": 0})  # binds the queue
    receive_all(connection)
    with Connection("filesystem://", transport_options=options(folder)) as stock:
        publish(stock, {"n": 1})
    assert receive_all(connection) == [{"n": 1}]


def test_a_new_exchange_table_is_created_whole_and_later_bindings_are_added(
    connection: Connection, folder: Path
) -> None:
    channel: Channel = connection.default_channel
    channel._queue_bind("jobs", "jobs", None, "jobs")
    channel._queue_bind("jobs", "urgent", None, "urgent")
    assert [entry.queue for entry in channel.get_table("jobs")] == ["urgent", "jobs"]
    assert [path.name for path in (folder / "control").iterdir()] == ["jobs.exchange"]


def test_a_worker_asked_to_stop_stops_waiting_for_messages(connection: Connection, monkeypatch) -> None:
    """An idle wait with no end (a worker's) ends once the worker is asked to stop, and a message
    is still delivered while it is not: the stop request is all that cuts the wait short."""
    publish(connection, {"job": 1})
    received: list[dict] = []
    outcome: list[str] = []

    def wait_for_ever() -> None:
        with Consumer(connection, [JOBS], callbacks=[lambda body, message: (received.append(body), message.ack())]):
            connection.drain_events()  # the published message: delivered at once
            try:
                connection.drain_events()  # nothing more: waits until the stop request
            except TimeoutError:
                outcome.append("stopped waiting")

    waiting = threading.Thread(target=wait_for_ever, daemon=True)
    waiting.start()
    waiting.join(1.0)
    assert received == [{"job": 1}] and waiting.is_alive(), "an idle wait without a stop request goes on"
    monkeypatch.setattr(worker_state, "should_stop", 0)  # what a warm shutdown (SIGTERM) sets
    waiting.join(10.0)
    assert outcome == ["stopped waiting"]
