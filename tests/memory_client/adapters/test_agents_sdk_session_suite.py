"""The OpenAI Agents SDK's own session tests, run against MemsiteSession on the live server.

Adapted from openai-agents 0.24.0 (the release pinned in requirements-dev.txt), from its source
distribution's tests/memory/test_session.py, tests/memory/test_session_limit.py and (the
`get_text_message` helper) tests/test_responses.py, under the SDK's license:

    MIT License

    Copyright (c) 2025 OpenAI

    Permission is hereby granted, free of charge, to any person obtaining a copy
    of this software and associated documentation files (the "Software"), to deal
    in the Software without restriction, including without limitation the rights
    to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
    copies of the Software, and to permit persons to whom the Software is
    furnished to do so, subject to the following conditions:

    The above copyright notice and this permission notice shall be included in all
    copies or substantial portions of the Software.

    THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
    IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
    FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
    AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
    LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
    OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
    SOFTWARE.

What changed: each `SQLiteSession(session_id, db_path, session_settings=...)` is
`memsite_session(session_id, session_settings=...)`, a fixture (no database file: the live
server keeps the items; the SDK's temporary directories went with it); `@pytest.mark.asyncio`
is anyio's marker (anyio's pytest plugin comes with the SDK's dependencies, pytest-asyncio does
not); `match="SQLiteSession is closed"` is "MemsiteSession is closed"; the concurrent-access
case reads the thread pool's results, so a failed write fails it; trace export is off (the SDK's
conftest installs an in-memory trace processor instead); the streamed branch of
run_agent_async lost an unused variable; some comments and docstrings are shorter. The
scenarios, inputs and assertions are the SDK's.

NOT_APPLICABLE lists the SDK's cases in those two files that are not here, and why: they read
SQLite's internals (connections, locks, raw rows), or they test the SDK itself without a session.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from agents import Agent, RunConfig, Runner, SessionSettings, TResponseInputItem, set_tracing_disabled
from agents.testing import ScriptedModel
from openai.types.responses import ResponseOutputItem, ResponseOutputMessage, ResponseOutputText

from memory_client.adapters.openai_agents import MemsiteSession

pytestmark = pytest.mark.anyio

_SQLITE_INTERNALS = "reads SQLiteSession's internals (connections, file locks, transactions or raw rows)"
_NO_SESSION = "tests the SDK itself, with no session backend involved"
NOT_APPLICABLE: dict[str, str] = {
    # tests/memory/test_session.py
    "test_await_mutation_cancellation_hides_later_failure_without_loop_error": "tests the SQLite module's "
    "private _await_mutation helper",
    "test_session_memory_disabled_parametrized": _NO_SESSION + " (session=None)",
    "test_sqlite_session_close_closes_worker_thread_connections": _SQLITE_INTERNALS,
    "test_sqlite_session_reaps_connections_from_exited_worker_threads": _SQLITE_INTERNALS,
    "test_sqlite_session_closes_retired_connections_before_the_next_allocation": _SQLITE_INTERNALS,
    "test_sqlite_session_keeps_connections_of_live_worker_threads": _SQLITE_INTERNALS,
    "test_sqlite_session_pop_item_skips_corrupt_most_recent": _SQLITE_INTERNALS + " (writes a corrupt row)",
    "test_sqlite_session_pop_item_returns_none_after_dropping_only_corrupt_rows": _SQLITE_INTERNALS,
    "test_sqlite_session_get_items_limit_skips_corrupt_newest_rows": _SQLITE_INTERNALS,
    "test_sqlite_session_get_items_session_settings_limit_skips_corrupt_rows": _SQLITE_INTERNALS,
    "test_sqlite_session_file_lock_is_shared_across_instances": _SQLITE_INTERNALS,
    "test_sqlite_session_failed_add_items_releases_write_lock": _SQLITE_INTERNALS + " (probes the write lock)",
    "test_session_add_items_exception_propagates_in_streamed": "replaces the session's add_items with a "
    "failing function: only the SDK's Runner runs",
    "test_session_settings_resolve": _NO_SESSION + " (SessionSettings.resolve)",
    "test_sqlite_session_failed_clear_session_rolls_back": _SQLITE_INTERNALS,
    "test_sqlite_session_failed_pop_item_releases_write_lock": _SQLITE_INTERNALS,
    "test_sqlite_session_rollback_failure_evicts_connection": _SQLITE_INTERNALS,
    "test_sqlite_session_close_retries_quarantined_connection": _SQLITE_INTERNALS,
    "test_sqlite_session_post_commit_cancellation_propagates_after_known_outcome": _SQLITE_INTERNALS,
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def memsite_session(memsite_env: dict[str, str]) -> Iterator[Callable[..., MemsiteSession]]:
    """What the SDK's tests build as SQLiteSession(session_id, db_path, session_settings=...)."""
    made: list[MemsiteSession] = []

    def make(session_id: str, session_settings: Any = None) -> MemsiteSession:
        made.append(MemsiteSession(session_id, session_settings=session_settings, **memsite_env))
        return made[-1]

    set_tracing_disabled(True)  # the SDK would export traces to OpenAI's servers
    yield make
    set_tracing_disabled(False)
    for session in made:
        session.close()


def get_text_message(content: str) -> ResponseOutputItem:  # the SDK's tests/test_responses.py
    return ResponseOutputMessage(
        id="1",
        type="message",
        role="assistant",
        content=[ResponseOutputText(text=content, type="output_text", annotations=[], logprobs=[])],
        status="completed",
    )


# Helper functions for parametrized testing of different Runner methods
def _run_sync_wrapper(agent, input_data, **kwargs):
    """Wrapper for run_sync that properly sets up an event loop."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        return Runner.run_sync(agent, input_data, **kwargs)
    finally:
        loop.close()


async def run_agent_async(runner_method: str, agent, input_data, **kwargs):
    """Helper function to run agent with different methods."""
    if runner_method == "run":
        return await Runner.run(agent, input_data, **kwargs)
    elif runner_method == "run_sync":
        # For run_sync, we need to run it in a thread with its own event loop
        return await asyncio.to_thread(_run_sync_wrapper, agent, input_data, **kwargs)
    elif runner_method == "run_streamed":
        result = Runner.run_streamed(agent, input_data, **kwargs)
        async for _event in result.stream_events():
            pass
        return result
    else:
        raise ValueError(f"Unknown runner method: {runner_method}")


# --- tests/memory/test_session.py ----------------------------------------------------------------


@pytest.mark.parametrize("runner_method", ["run", "run_sync", "run_streamed"])
async def test_session_memory_basic_functionality_parametrized(runner_method, memsite_session):
    session = memsite_session("test_session_123")

    model = ScriptedModel()
    agent = Agent(name="test", model=model)

    # First turn
    model.enqueue([get_text_message("San Francisco")])
    result1 = await run_agent_async(runner_method, agent, "What city is the Golden Gate Bridge in?", session=session)
    assert result1.final_output == "San Francisco"

    # Second turn - should have conversation history
    model.enqueue([get_text_message("California")])
    result2 = await run_agent_async(runner_method, agent, "What state is it in?", session=session)
    assert result2.final_output == "California"

    # The model should have received the full conversation history
    last_input = model.calls[-1].input
    assert len(last_input) > 1  # Should have more than just the current message

    session.close()


@pytest.mark.parametrize("runner_method", ["run", "run_sync", "run_streamed"])
async def test_session_memory_with_explicit_instance_parametrized(runner_method, memsite_session):
    session = memsite_session("test_session_456")

    model = ScriptedModel()
    agent = Agent(name="test", model=model)

    model.enqueue([get_text_message("Hello")])
    result1 = await run_agent_async(runner_method, agent, "Hi there", session=session)
    assert result1.final_output == "Hello"

    model.enqueue([get_text_message("I remember you said hi")])
    result2 = await run_agent_async(runner_method, agent, "Do you remember what I said?", session=session)
    assert result2.final_output == "I remember you said hi"

    session.close()


@pytest.mark.parametrize("runner_method", ["run", "run_sync", "run_streamed"])
async def test_session_memory_different_sessions_parametrized(runner_method, memsite_session):
    model = ScriptedModel()
    agent = Agent(name="test", model=model)

    session_1 = memsite_session("session_1")
    model.enqueue([get_text_message("I like cats")])
    result1 = await run_agent_async(runner_method, agent, "I like cats", session=session_1)
    assert result1.final_output == "I like cats"

    session_2 = memsite_session("session_2")
    model.enqueue([get_text_message("I like dogs")])
    result2 = await run_agent_async(runner_method, agent, "I like dogs", session=session_2)
    assert result2.final_output == "I like dogs"

    # Back to Session 1 - should remember cats, not dogs
    model.enqueue([get_text_message("Yes, you mentioned cats")])
    result3 = await run_agent_async(runner_method, agent, "What did I say I like?", session=session_1)
    assert result3.final_output == "Yes, you mentioned cats"

    session_1.close()
    session_2.close()


async def test_sqlite_session_memory_direct(memsite_session):
    session = memsite_session("direct_test")

    items: list[TResponseInputItem] = [
        {"role": "user", "content": "Hello"},
        {"role": "assistant", "content": "Hi there!"},
    ]

    await session.add_items(items)
    retrieved = await session.get_items()

    assert len(retrieved) == 2
    assert retrieved[0].get("role") == "user"
    assert retrieved[0].get("content") == "Hello"
    assert retrieved[1].get("role") == "assistant"
    assert retrieved[1].get("content") == "Hi there!"

    await session.clear_session()
    retrieved_after_clear = await session.get_items()
    assert len(retrieved_after_clear) == 0

    session.close()


async def test_sqlite_session_closed_rejects_empty_add_items(memsite_session):
    """add_items([]) must not bypass the closed check through the empty-list fast path."""
    session = memsite_session("closed_empty_add_test")
    session.close()

    with pytest.raises(RuntimeError, match="MemsiteSession is closed"):
        await session.add_items([])


async def test_sqlite_session_memory_pop_item(memsite_session):
    session = memsite_session("pop_test")

    popped = await session.pop_item()
    assert popped is None

    items: list[TResponseInputItem] = [
        {"role": "user", "content": "Hello"},
        {"role": "assistant", "content": "Hi there!"},
        {"role": "user", "content": "How are you?"},
    ]

    await session.add_items(items)

    retrieved = await session.get_items()
    assert len(retrieved) == 3

    popped = await session.pop_item()
    assert popped is not None
    assert popped.get("role") == "user"
    assert popped.get("content") == "How are you?"

    retrieved_after_pop = await session.get_items()
    assert len(retrieved_after_pop) == 2
    assert retrieved_after_pop[-1].get("content") == "Hi there!"

    popped2 = await session.pop_item()
    assert popped2 is not None
    assert popped2.get("role") == "assistant"
    assert popped2.get("content") == "Hi there!"

    popped3 = await session.pop_item()
    assert popped3 is not None
    assert popped3.get("role") == "user"
    assert popped3.get("content") == "Hello"

    popped4 = await session.pop_item()
    assert popped4 is None

    final_items = await session.get_items()
    assert len(final_items) == 0

    session.close()


async def test_session_memory_pop_different_sessions(memsite_session):
    session_1 = memsite_session("session_1")
    session_2 = memsite_session("session_2")

    items_1: list[TResponseInputItem] = [{"role": "user", "content": "Session 1 message"}]
    items_2: list[TResponseInputItem] = [
        {"role": "user", "content": "Session 2 message 1"},
        {"role": "user", "content": "Session 2 message 2"},
    ]

    await session_1.add_items(items_1)
    await session_2.add_items(items_2)

    popped = await session_2.pop_item()
    assert popped is not None
    assert popped.get("content") == "Session 2 message 2"

    session_1_items = await session_1.get_items()
    assert len(session_1_items) == 1
    assert session_1_items[0].get("content") == "Session 1 message"

    session_2_items = await session_2.get_items()
    assert len(session_2_items) == 1
    assert session_2_items[0].get("content") == "Session 2 message 1"

    session_1.close()
    session_2.close()


async def test_sqlite_session_get_items_with_limit(memsite_session):
    session = memsite_session("count_test")

    items: list[TResponseInputItem] = [
        {"role": "user", "content": "Message 1"},
        {"role": "assistant", "content": "Response 1"},
        {"role": "user", "content": "Message 2"},
        {"role": "assistant", "content": "Response 2"},
        {"role": "user", "content": "Message 3"},
        {"role": "assistant", "content": "Response 3"},
    ]

    await session.add_items(items)

    all_items = await session.get_items()
    assert len(all_items) == 6
    assert all_items[0].get("content") == "Message 1"
    assert all_items[-1].get("content") == "Response 3"

    latest_2 = await session.get_items(limit=2)
    assert len(latest_2) == 2
    assert latest_2[0].get("content") == "Message 3"
    assert latest_2[1].get("content") == "Response 3"

    latest_4 = await session.get_items(limit=4)
    assert len(latest_4) == 4
    assert latest_4[0].get("content") == "Message 2"
    assert latest_4[1].get("content") == "Response 2"
    assert latest_4[2].get("content") == "Message 3"
    assert latest_4[3].get("content") == "Response 3"

    latest_10 = await session.get_items(limit=10)
    assert len(latest_10) == 6  # Should return all available items
    assert latest_10[0].get("content") == "Message 1"
    assert latest_10[-1].get("content") == "Response 3"

    latest_0 = await session.get_items(limit=0)
    assert len(latest_0) == 0

    session.close()


@pytest.mark.parametrize("runner_method", ["run", "run_sync", "run_streamed"])
async def test_session_memory_appends_list_input_by_default(runner_method, memsite_session):
    session = memsite_session("test_validation_parametrized")

    model = ScriptedModel()
    agent = Agent(name="test", model=model)

    initial_history: list[TResponseInputItem] = [
        {"role": "user", "content": "Earlier message"},
        {"role": "assistant", "content": "Saved reply"},
    ]
    await session.add_items(initial_history)

    list_input = [{"role": "user", "content": "Test message"}]

    model.enqueue([get_text_message("This should run")])
    await run_agent_async(runner_method, agent, list_input, session=session)

    assert model.calls[-1].input == initial_history + list_input

    session.close()


@pytest.mark.parametrize("runner_method", ["run", "run_sync", "run_streamed"])
async def test_session_callback_prepared_input(runner_method, memsite_session):
    model = ScriptedModel()
    agent = Agent(name="test", model=model)

    session = memsite_session("session_1")

    initial_history: list[TResponseInputItem] = [
        {"role": "user", "content": "Hello there."},
        {"role": "assistant", "content": "Hi, I'm here to assist you."},
    ]
    try:
        await session.add_items(initial_history)

        def filter_assistant_messages(history, new_input):
            # Only include user messages from history
            return [item for item in history if item["role"] == "user"] + new_input

        new_turn_input = [{"role": "user", "content": "What your name?"}]
        model.enqueue([get_text_message("I'm gpt-4o")])

        await run_agent_async(
            runner_method,
            agent,
            new_turn_input,
            session=session,
            run_config=RunConfig(session_input_callback=filter_assistant_messages),
        )

        expected_model_input = [
            initial_history[0],  # From history
            new_turn_input[0],  # New input
        ]

        assert len(model.calls[-1].input) == 2
        assert model.calls[-1].input == expected_model_input
    finally:
        session.close()


@pytest.mark.parametrize("runner_method", ["run", "run_sync", "run_streamed"])
async def test_session_callback_repeating_history_does_not_grow_session(runner_method, memsite_session):
    model = ScriptedModel()
    agent = Agent(name="test", model=model)
    session = memsite_session("session_repeat")

    def repeat_first(history, new_input):
        if not history:
            return new_input
        return history + [history[0]] + new_input  # noqa: RUF005  (the SDK's code)

    try:
        for turn in range(3):
            model.enqueue([get_text_message(f"assistant {turn}")])
            await run_agent_async(
                runner_method,
                agent,
                f"user {turn}",
                session=session,
                run_config=RunConfig(session_input_callback=repeat_first),
            )

        stored = await session.get_items()
        user_messages = [item for item in stored if item.get("role") == "user"]
        assert [item.get("content") for item in user_messages] == ["user 0", "user 1", "user 2"]
        assert len(stored) == 6
    finally:
        session.close()


async def test_sqlite_session_unicode_content(memsite_session):
    session = memsite_session("unicode_test")

    items: list[TResponseInputItem] = [
        {"role": "user", "content": "こんにちは"},
        {"role": "assistant", "content": "😊👍"},
        {"role": "user", "content": "Привет"},
    ]
    await session.add_items(items)

    retrieved = await session.get_items()
    assert retrieved[0].get("content") == "こんにちは"
    assert retrieved[1].get("content") == "😊👍"
    assert retrieved[2].get("content") == "Привет"
    session.close()


async def test_sqlite_session_special_characters_and_sql_injection(memsite_session):
    session = memsite_session("special_chars_test")

    items: list[TResponseInputItem] = [
        {"role": "user", "content": "O'Reilly"},
        {"role": "assistant", "content": "DROP TABLE sessions;"},
        {"role": "user", "content": ('"SELECT * FROM users WHERE name = "admin";"')},
        {"role": "assistant", "content": "Robert'); DROP TABLE students;--"},
        {"role": "user", "content": "Normal message"},
    ]
    await session.add_items(items)

    retrieved = await session.get_items()
    assert len(retrieved) == len(items)
    assert retrieved[0].get("content") == "O'Reilly"
    assert retrieved[1].get("content") == "DROP TABLE sessions;"
    assert retrieved[2].get("content") == '"SELECT * FROM users WHERE name = "admin";"'
    assert retrieved[3].get("content") == "Robert'); DROP TABLE students;--"
    assert retrieved[4].get("content") == "Normal message"
    session.close()


async def test_sqlite_session_concurrent_access(memsite_session):
    """Concurrent access to the same session keeps every item."""
    import concurrent.futures

    session = memsite_session("concurrent_test")

    items: list[TResponseInputItem] = [{"role": "user", "content": f"Message {i}"} for i in range(10)]

    # Use ThreadPoolExecutor to simulate concurrent writes
    def add_item(item):
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        loop.run_until_complete(session.add_items([item]))
        loop.close()

    with concurrent.futures.ThreadPoolExecutor(max_workers=5) as executor:
        list(executor.map(add_item, items))  # list(): a failed write fails the test (the SDK's drops it)

    retrieved = await session.get_items()
    contents = {content for item in retrieved for content in [item.get("content")] if isinstance(content, str)}
    expected = {f"Message {i}" for i in range(10)}
    assert contents == expected
    session.close()


async def test_session_settings_default(memsite_session):
    """session_settings defaults to an empty SessionSettings."""
    session = memsite_session("default_settings_test")

    assert isinstance(session.session_settings, SessionSettings)
    assert session.session_settings.limit is None

    session.close()


async def test_session_settings_constructor(memsite_session):
    session = memsite_session("constructor_settings_test", session_settings=SessionSettings(limit=5))

    assert session.session_settings is not None
    assert session.session_settings.limit == 5

    session.close()


async def test_session_settings_constructor_normalizes_dictionary(memsite_session) -> None:
    session = memsite_session("dictionary_settings_test", session_settings={"limit": 0})

    assert isinstance(session.session_settings, SessionSettings)
    assert session.session_settings.limit == 0
    assert session.session_settings.resolve({"limit": 4}).limit == 4

    session.close()


def test_session_settings_rejects_unknown_dictionary_fields(memsite_session) -> None:
    with pytest.raises(TypeError, match="Unknown session settings: limitt"):
        memsite_session("invalid_settings_test", session_settings={"limitt": 1})


async def test_get_items_uses_session_settings_limit(memsite_session):
    session = memsite_session("uses_settings_limit_test", session_settings=SessionSettings(limit=3))

    items: list[TResponseInputItem] = [{"role": "user", "content": f"Message {i}"} for i in range(5)]
    await session.add_items(items)

    # get_items() with no limit should use session_settings.limit=3
    retrieved = await session.get_items()
    assert len(retrieved) == 3
    assert retrieved[0].get("content") == "Message 2"
    assert retrieved[1].get("content") == "Message 3"
    assert retrieved[2].get("content") == "Message 4"

    session.close()


async def test_get_items_explicit_limit_overrides_session_settings(memsite_session):
    session = memsite_session("explicit_override_test", session_settings=SessionSettings(limit=5))

    items: list[TResponseInputItem] = [{"role": "user", "content": f"Message {i}"} for i in range(10)]
    await session.add_items(items)

    # Explicit limit=2 should override session_settings.limit=5
    retrieved = await session.get_items(limit=2)
    assert len(retrieved) == 2
    assert retrieved[0].get("content") == "Message 8"
    assert retrieved[1].get("content") == "Message 9"

    session.close()


async def test_runner_with_session_settings_override(memsite_session):
    session = memsite_session("runner_override_test", session_settings=SessionSettings(limit=100))

    items: list[TResponseInputItem] = [{"role": "user", "content": f"Turn {i}"} for i in range(10)]
    await session.add_items(items)

    model = ScriptedModel()
    agent = Agent(name="test", model=model)
    model.enqueue([get_text_message("Got it")])

    await Runner.run(
        agent,
        "New question",
        session=session,
        run_config=RunConfig(session_settings=SessionSettings(limit=2)),  # Override to 2
    )

    last_input = model.calls[-1].input
    history_items = [item for item in last_input if item.get("content") != "New question"]
    # Should have 2 history items (last two from the 10 we added)
    assert len(history_items) == 2

    session.close()


# --- tests/memory/test_session_limit.py ----------------------------------------------------------


@pytest.mark.parametrize("runner_method", ["run", "run_sync", "run_streamed"])
async def test_session_limit_parameter(runner_method, memsite_session):
    session = memsite_session("limit_test")

    model = ScriptedModel()
    agent = Agent(name="test", model=model)

    model.enqueue([get_text_message("Reply 1")])
    await run_agent_async(runner_method, agent, "Message 1", session=session)

    model.enqueue([get_text_message("Reply 2")])
    await run_agent_async(runner_method, agent, "Message 2", session=session)

    model.enqueue([get_text_message("Reply 3")])
    await run_agent_async(runner_method, agent, "Message 3", session=session)

    all_items = await session.get_items()
    assert len(all_items) == 6

    # session_limit via RunConfig - should only get last 2 history items + new input
    model.enqueue([get_text_message("Reply 4")])
    await run_agent_async(
        runner_method,
        agent,
        "Message 4",
        session=session,
        run_config=RunConfig(session_settings=SessionSettings(limit=2)),
    )

    last_input = model.calls[-1].input
    assert len(last_input) == 3
    assert last_input[0].get("content") == "Message 3"
    assert last_input[1].get("content")[0]["text"] == "Reply 3"
    assert last_input[2].get("content") == "Message 4"

    session.close()


@pytest.mark.parametrize("runner_method", ["run", "run_sync", "run_streamed"])
async def test_session_limit_drops_unmatched_history_function_call_output(runner_method, memsite_session):
    """A limit boundary must not pass an output whose matching call was excluded."""
    session = memsite_session("limit_tool_pair")
    history: list[Any] = [
        {"role": "user", "content": "What is the weather?"},
        {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "It is sunny.", "annotations": []}],
        },
    ]
    await session.add_items(history)

    assert await session.get_items(limit=2) == history[-2:]

    model = ScriptedModel()
    model.enqueue([get_text_message("Tomorrow is sunny too.")])
    agent = Agent(name="test", model=model)

    await run_agent_async(
        runner_method,
        agent,
        "What about tomorrow?",
        session=session,
        run_config=RunConfig(session_settings=SessionSettings(limit=2)),
    )

    assert model.calls[-1].input == [history[-1], {"role": "user", "content": "What about tomorrow?"}]
    session.close()


@pytest.mark.parametrize("runner_method", ["run", "run_sync", "run_streamed"])
async def test_session_limit_zero(runner_method, memsite_session):
    session = memsite_session("limit_zero_test")

    model = ScriptedModel()
    agent = Agent(name="test", model=model)

    model.enqueue([get_text_message("Reply 1")])
    await run_agent_async(runner_method, agent, "Message 1", session=session)

    model.enqueue([get_text_message("Reply 2")])
    await run_agent_async(runner_method, agent, "Message 2", session=session)

    # limit=0 - should get NO history, just new message
    model.enqueue([get_text_message("Reply 3")])
    await run_agent_async(
        runner_method,
        agent,
        "Message 3",
        session=session,
        run_config=RunConfig(session_settings=SessionSettings(limit=0)),
    )

    last_input = model.calls[-1].input
    assert len(last_input) == 1
    assert last_input[0].get("content") == "Message 3"

    session.close()


@pytest.mark.parametrize("runner_method", ["run", "run_sync", "run_streamed"])
async def test_session_limit_none_gets_all_history(runner_method, memsite_session):
    session = memsite_session("limit_none_test")

    model = ScriptedModel()
    agent = Agent(name="test", model=model)

    for i in range(1, 6):
        model.enqueue([get_text_message(f"Reply {i}")])
        await run_agent_async(runner_method, agent, f"Message {i}", session=session)

    all_items = await session.get_items()
    assert len(all_items) == 10

    model.enqueue([get_text_message("Reply 6")])
    await run_agent_async(
        runner_method,
        agent,
        "Message 6",
        session=session,
        run_config=RunConfig(session_settings=SessionSettings(limit=None)),
    )

    last_input = model.calls[-1].input
    assert len(last_input) == 11  # 10 history + 1 new
    assert last_input[0].get("content") == "Message 1"
    assert last_input[-1].get("content") == "Message 6"

    session.close()


@pytest.mark.parametrize("runner_method", ["run", "run_sync", "run_streamed"])
async def test_session_limit_larger_than_history(runner_method, memsite_session):
    session = memsite_session("limit_large_test")

    model = ScriptedModel()
    agent = Agent(name="test", model=model)

    model.enqueue([get_text_message("Reply 1")])
    await run_agent_async(runner_method, agent, "Message 1", session=session)

    model.enqueue([get_text_message("Reply 2")])
    await run_agent_async(
        runner_method,
        agent,
        "Message 2",
        session=session,
        run_config=RunConfig(session_settings=SessionSettings(limit=100)),
    )

    last_input = model.calls[-1].input
    assert len(last_input) == 3  # 2 history + 1 new
    assert last_input[0].get("content") == "Message 1"
    assert last_input[1].get("content")[0]["text"] == "Reply 1"
    assert last_input[2].get("content") == "Message 2"

    session.close()
