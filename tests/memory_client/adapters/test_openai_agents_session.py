"""The OpenAI Agents SDK Session on memsite: the SDK's own Runner, and each item kind round-tripped."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from agents import Agent, OpenAIChatCompletionsModel, RunConfig, Runner, function_tool
from agents.memory.session import Session
from agents.memory.session_settings import SessionSettings
from openai import AsyncOpenAI

from memory_app.compaction import services as compaction
from memory_client.adapters.openai_agents import MemsiteSession
from tests.llm_server import Reply, ToolCall, ToolCallsReply
from tests.memory_client.adapters.conftest import stored_messages
from tests.memory_client.conftest import PNG_DATA_URL

WEATHER = json.dumps({"temp_c": 4, "sky": "rain"})


@function_tool
def get_weather(city: str) -> str:
    """The current weather of a city."""
    return WEATHER


def weather_agent(llm_server: Any) -> Agent:
    client = AsyncOpenAI(base_url=llm_server.base_url, api_key="x")
    model = OpenAIChatCompletionsModel(model="scripted-model", openai_client=client)
    return Agent(name="weather", instructions="You are a weather assistant.", model=model, tools=[get_weather])


def run(agent: Agent, text: str, session: MemsiteSession) -> str:
    result = asyncio.run(Runner.run(agent, text, session=session, run_config=RunConfig(tracing_disabled=True)))
    return str(result.final_output)


@pytest.fixture
def session(memsite_env: dict[str, str]) -> Any:
    made: list[MemsiteSession] = []

    def make(name: str = "agents-user-42", **kwargs: Any) -> MemsiteSession:
        made.append(MemsiteSession(name, **memsite_env, **kwargs))
        return made[-1]

    yield make
    for each in made:
        each.close()


def test_the_second_run_sees_the_first_exchange_with_its_tool_call_read_back_from_memsite(
    session, llm_server, client_tenant
):
    agent = weather_agent(llm_server)
    llm_server.script(
        ToolCallsReply([ToolCall("get_weather", json.dumps({"city": "Oslo"}), id="call_oslo")]),
        Reply("It is 4 °C and raining in Oslo."),
        Reply("You asked about Oslo."),
    )

    assert run(agent, "What is the weather in Oslo?", session()) == "It is 4 °C and raining in Oslo."
    # Another process: a new Session object, the same name.
    assert run(agent, "Which city did I ask about?", session()) == "You asked about Oslo."

    second_input = llm_server.requests[-1]["messages"]
    assert second_input == [
        {"role": "system", "content": "You are a weather assistant."},
        {"role": "user", "content": "What is the weather in Oslo?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_oslo",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_oslo", "content": WEATHER},
        {"role": "assistant", "content": "It is 4 °C and raining in Oslo."},
        {"role": "user", "content": "Which city did I ask about?"},
    ]
    # The server understands the exchange in its own (OpenAI chat) terms.
    stored = stored_messages(client_tenant, "agents-user-42")
    assert [(m["role"], m["tool_call_id"]) for m in stored] == [
        ("user", None),
        ("assistant", None),
        ("tool", "call_oslo"),
        ("assistant", None),
        ("user", None),
        ("assistant", None),
    ]
    assert stored[1]["tool_calls"][0]["function"] == {"name": "get_weather", "arguments": '{"city": "Oslo"}'}
    assert isinstance(session(), Session)  # the SDK's runtime-checkable protocol


EVERY_KIND: list[dict[str, Any]] = [
    {"role": "system", "content": "Be brief."},
    {"role": "developer", "content": [{"type": "input_text", "text": "Prefer metric units."}]},
    {
        "role": "user",
        "content": [
            {"type": "input_text", "text": "What is in this picture?"},
            {"type": "input_image", "image_url": PNG_DATA_URL, "detail": "low"},
        ],
        "type": "message",
    },
    {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "The user wants a description, then the weather."}],
        "encrypted_content": "gAAAA-opaque",
    },
    {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "A single pixel.", "annotations": []}],
    },
    {"type": "function_call", "call_id": "call_a", "name": "get_weather", "arguments": '{"city": "Oslo"}'},
    {"type": "function_call", "call_id": "call_b", "name": "get_weather", "arguments": '{"city": "Bergen"}'},
    {"type": "function_call_output", "call_id": "call_a", "output": WEATHER},
    {
        "type": "function_call_output",
        "call_id": "call_b",
        "output": [{"type": "input_text", "text": "cloudy"}, {"type": "input_image", "image_url": PNG_DATA_URL}],
    },
    {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search", "query": "oslo"}},
    {"role": "assistant", "content": "Rain in Oslo, clouds in Bergen."},
]


def test_every_item_kind_comes_back_exactly_as_added(session):
    memory = session()

    asyncio.run(memory.add_items(EVERY_KIND[:4]))
    asyncio.run(memory.add_items(EVERY_KIND[4:]))

    assert asyncio.run(memory.get_items()) == EVERY_KIND


def test_items_are_stored_as_openai_chat_messages_the_server_understands(session, client_tenant):
    asyncio.run(session("chat-form").add_items(EVERY_KIND))

    stored = stored_messages(client_tenant, "chat-form")
    chat = [{key: m[key] for key in ("role", "content", "tool_calls", "tool_call_id") if m[key]} for m in stored]
    assert chat == [
        {"role": "system", "content": "Be brief."},
        {"role": "system", "content": "Prefer metric units."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is in this picture?"},
                {"type": "image_url", "image_url": {"url": PNG_DATA_URL, "detail": "low"}},
            ],
        },
        {
            "role": "assistant",
            "content": "A single pixel.",
            "tool_calls": [
                {
                    "id": "call_a",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
                },
                {
                    "id": "call_b",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Bergen"}'},
                },
            ],
        },
        {"role": "tool", "content": WEATHER, "tool_call_id": "call_a"},
        {
            "role": "tool",
            "content": [
                {"type": "text", "text": "cloudy"},
                {"type": "image_url", "image_url": {"url": PNG_DATA_URL, "detail": "auto"}},
            ],
            "tool_call_id": "call_b",
        },
        {"role": "assistant", "content": "Rain in Oslo, clouds in Bergen."},
    ]
    assert stored[3]["reasoning_details"] == [
        {"type": "reasoning.summary", "summary": "The user wants a description, then the weather.", "id": "rs_1"},
        {"type": "reasoning.encrypted", "data": "gAAAA-opaque", "id": "rs_1"},
    ]


def test_limit_gives_the_newest_items_in_order(session):
    memory = session()
    asyncio.run(memory.add_items(EVERY_KIND))

    assert asyncio.run(memory.get_items(limit=3)) == EVERY_KIND[-3:]
    assert asyncio.run(memory.get_items(limit=7)) == EVERY_KIND[-7:]
    assert asyncio.run(memory.get_items(limit=0)) == []
    assert asyncio.run(memory.get_items(limit=100)) == EVERY_KIND
    limited = session(session_settings={"limit": 2})
    assert asyncio.run(limited.get_items()) == EVERY_KIND[-2:]


def test_settings_default_to_an_empty_settings_object_as_the_sdks_own_sessions_do(session):
    assert session().session_settings == SessionSettings()
    assert session(session_settings={"limit": 3}).session_settings == SessionSettings(limit=3)


def test_a_closed_session_refuses_every_call_as_the_sdks_own_sessions_do(session):
    memory = session()
    asyncio.run(memory.add_items([{"role": "user", "content": "Hello"}]))
    memory.close()
    memory.close()  # closing twice is harmless

    calls = [
        lambda: memory.add_items([]),  # the empty list is no way around the check
        lambda: memory.add_items([{"role": "user", "content": "again"}]),
        lambda: memory.get_items(),
        lambda: memory.pop_item(),
        lambda: memory.clear_session(),
    ]
    for call in calls:
        with pytest.raises(RuntimeError, match="MemsiteSession is closed"):
            asyncio.run(call())
    assert asyncio.run(session().get_items()) == [{"role": "user", "content": "Hello"}]  # nothing changed


def test_a_session_never_written_is_empty_and_is_not_created_by_reading(session, client_tenant):
    memory = session("nobody-yet")

    assert asyncio.run(memory.get_items()) == []
    assert asyncio.run(memory.pop_item()) is None
    asyncio.run(memory.clear_session())
    assert client_tenant.client.get("/api/v1/sessions/", {"external_id": "nobody-yet"}).json()["count"] == 0


def test_pop_item_removes_the_newest_items_one_at_a_time(session):
    memory = session()
    asyncio.run(memory.add_items(EVERY_KIND))

    popped = [asyncio.run(memory.pop_item()) for _ in range(6)]

    assert popped == EVERY_KIND[-6:][::-1]
    assert asyncio.run(memory.get_items()) == EVERY_KIND[:-6]
    # Items popped from the middle of a model turn can be added back.
    asyncio.run(memory.add_items(EVERY_KIND[-6:]))
    assert asyncio.run(session().get_items()) == EVERY_KIND


def test_clear_session_empties_it_and_the_name_stays_usable(session, client_tenant):
    memory = session("to-clear", system_prompt="You are terse.")
    asyncio.run(memory.add_items(EVERY_KIND[:3]))

    asyncio.run(memory.clear_session())

    assert asyncio.run(memory.get_items()) == []
    asyncio.run(memory.add_items([{"role": "user", "content": "again"}]))
    assert asyncio.run(session("to-clear").get_items()) == [{"role": "user", "content": "again"}]
    found = client_tenant.client.get("/api/v1/sessions/", {"external_id": "to-clear"}).json()["results"]
    assert found[0]["system_prompt"] == "You are terse."


def test_messages_other_clients_wrote_are_read_as_items(session, client_tenant):
    memory = session("shared")
    asyncio.run(memory.add_items([{"role": "user", "content": "What is the weather in Oslo?"}]))
    session_id = memory.memsite_session_id
    other = [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": WEATHER},
        {"role": "assistant", "content": "Rainy."},
    ]
    response = client_tenant.client.post(f"/api/v1/sessions/{session_id}/messages/", {"messages": other}, "json")
    assert response.status_code == 201, response.content

    assert asyncio.run(memory.get_items()) == [
        {"role": "user", "content": "What is the weather in Oslo?"},
        {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": WEATHER},
        {"role": "assistant", "content": "Rainy."},
    ]


MANAGED = {"threshold_tokens": 1000, "active_context": {"summarization": {"grace_recent_messages": 1}}}


def test_managed_context_after_a_compaction_is_the_summary_and_the_newest_items_whole(
    session, llm_server, run_jobs_inline, live_server
):
    worker = run_jobs_inline(compaction.JOB)
    memory = session("managed", memory_type="managed_conversation", memory_config=MANAGED)
    filler = "The forecast discussion goes on and on about pressure systems. " * 20
    older: list[dict[str, Any]] = []
    for turn in range(6):
        older += [{"role": "user", "content": f"Question {turn}: {filler}"}, {"role": "assistant", "content": "Ok."}]
    newest = [
        {"role": "user", "content": "And Oslo?"},
        {"type": "function_call", "call_id": "call_oslo", "name": "get_weather", "arguments": '{"city": "Oslo"}'},
        {"type": "function_call_output", "call_id": "call_oslo", "output": WEATHER},
        {"role": "assistant", "content": "Rain."},
    ]
    asyncio.run(memory.add_items(older))
    while worker.run_pending():  # the append that crossed the threshold queued a compaction
        pass
    asyncio.run(memory.add_items(newest))

    managed = session("managed", context="managed")
    items = asyncio.run(managed.get_items())

    assert asyncio.run(memory.get_items()) == older + newest  # the raw history is never rewritten
    assert items[-4:] == newest
    served = json.dumps(items)
    assert "what happened" in served  # the scripted summary
    assert items[0] == older[0]  # the original instruction, kept ahead of the summary
    assert all(f"Question {turn}:" not in served for turn in range(1, 6))  # summarised, not served raw
    # A limit that would cut the tool output from its call drops the orphan output.
    assert asyncio.run(managed.get_items(limit=2)) == [newest[-1]]
    assert asyncio.run(managed.get_items(limit=3)) == newest[-3:]


def test_a_managed_read_names_its_served_context_and_replays_it_after_more_items(session):
    memory = session("replayed", memory_type="managed_conversation", memory_config=MANAGED)
    asyncio.run(memory.add_items([{"role": "user", "content": "Weather in Bergen?"}]))
    managed = session("replayed", context="managed")
    assert managed.last_context_id is None

    items = asyncio.run(managed.get_items())
    served_id = managed.last_context_id
    asyncio.run(memory.add_items([{"role": "assistant", "content": "Rain, as always."}]))

    assert items == [{"role": "user", "content": "Weather in Bergen?"}]
    replay = managed.replay_context()
    assert replay["context_id"] == served_id
    assert replay["messages"] == [{"role": "user", "content": "Weather in Bergen?"}]  # not the later item
    asyncio.run(managed.get_items())
    assert managed.last_context_id != served_id
