"""LangChain's chat message history on memsite: RunnableWithMessageHistory, and sync/async round trips."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    convert_to_openai_messages,
)
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import RunnableLambda
from langchain_core.runnables.history import RunnableWithMessageHistory
from openai import OpenAI

from memory_client.adapters.langchain import MemsiteChatMessageHistory
from tests.llm_server import Reply, ToolCall, ToolCallsReply
from tests.memory_client.adapters.conftest import stored_messages
from tests.memory_client.conftest import PNG_DATA_URL

WEATHER = json.dumps({"temp_c": 4, "sky": "rain"})


class ScriptedChatModel(BaseChatModel):
    """A chat model that sends its input to an OpenAI-compatible server with the openai SDK."""

    base_url: str

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any):
        client = OpenAI(base_url=self.base_url, api_key="x")
        reply = client.chat.completions.create(model="scripted-model", messages=convert_to_openai_messages(messages))
        answer = reply.choices[0].message
        calls = [
            {"id": call.id, "name": call.function.name, "args": json.loads(call.function.arguments)}
            for call in answer.tool_calls or []
        ]
        return ChatResult(
            generations=[ChatGeneration(message=AIMessage(content=answer.content or "", tool_calls=calls))]
        )


def get_weather(city: str) -> str:
    return WEATHER


def weather_chain(model: ScriptedChatModel) -> Any:
    """Prompt -> model -> (the tool and the model again when it calls one): every new message is returned."""
    prompt = ChatPromptTemplate.from_messages(
        [("system", "You are a weather assistant."), MessagesPlaceholder("history"), ("human", "{question}")]
    )

    def answer(value: dict[str, Any]) -> list[BaseMessage]:
        messages = prompt.invoke(value).to_messages()
        reply = model.invoke(messages)
        if not isinstance(reply, AIMessage) or not reply.tool_calls:
            return [reply]
        results = [ToolMessage(get_weather(**call["args"]), tool_call_id=call["id"]) for call in reply.tool_calls]
        return [reply, *results, model.invoke([*messages, reply, *results])]

    return RunnableLambda(answer)


@pytest.fixture
def history(memsite_env: dict[str, str]) -> Any:
    made: list[MemsiteChatMessageHistory] = []

    def make(session_id: str = "langchain-user-42", **kwargs: Any) -> MemsiteChatMessageHistory:
        made.append(MemsiteChatMessageHistory(session_id, **memsite_env, **kwargs))
        return made[-1]

    yield make
    for each in made:
        each.close()


# LangChain 1.x steers new code to LangGraph persistence (MemsiteStore and a checkpointer), but
# RunnableWithMessageHistory is what existing chains use, and what this history is for.
@pytest.mark.filterwarnings("ignore:RunnableWithMessageHistory is deprecated")
def test_the_second_call_sees_the_first_exchange_with_its_tool_call_read_back_from_memsite(
    history, llm_server, client_tenant
):
    chain = RunnableWithMessageHistory(
        weather_chain(ScriptedChatModel(base_url=llm_server.base_url)),
        history,  # a new history object per call, as a server process would make
        input_messages_key="question",
        history_messages_key="history",
    )
    llm_server.script(
        ToolCallsReply([ToolCall("get_weather", json.dumps({"city": "Oslo"}), id="call_oslo")]),
        Reply("It is 4 °C and raining in Oslo."),
        Reply("You asked about Oslo."),
    )
    config = {"configurable": {"session_id": "langchain-user-42"}}

    chain.invoke({"question": "What is the weather in Oslo?"}, config)
    last = chain.invoke({"question": "Which city did I ask about?"}, config)

    assert last[-1].content == "You asked about Oslo."
    assert llm_server.requests[-1]["messages"] == [
        {"role": "system", "content": "You are a weather assistant."},
        {"role": "user", "content": "What is the weather in Oslo?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "type": "function",
                    "id": "call_oslo",
                    "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
                }
            ],
        },
        {"role": "tool", "content": WEATHER, "tool_call_id": "call_oslo"},
        {"role": "assistant", "content": "It is 4 °C and raining in Oslo."},
        {"role": "user", "content": "Which city did I ask about?"},
    ]
    stored = stored_messages(client_tenant, "langchain-user-42")
    assert [(m["role"], m["tool_call_id"]) for m in stored] == [
        ("user", None),
        ("assistant", None),
        ("tool", "call_oslo"),
        ("assistant", None),
        ("user", None),
        ("assistant", None),
    ]
    assert stored[1]["tool_calls"][0]["function"] == {"name": "get_weather", "arguments": '{"city": "Oslo"}'}


CONVERSATION: list[BaseMessage] = [
    SystemMessage("Be brief."),
    HumanMessage(
        content=[
            {"type": "text", "text": "What is in this picture?"},
            {"type": "image_url", "image_url": {"url": PNG_DATA_URL}},
        ],
        id="human-1",
    ),
    AIMessage(
        content="Let me check the weather too.",
        tool_calls=[
            {"id": "call_a", "name": "get_weather", "args": {"city": "Oslo"}, "type": "tool_call"},
            {"id": "call_b", "name": "get_weather", "args": {"city": "Bergen"}, "type": "tool_call"},
        ],
        response_metadata={"model_name": "scripted-model", "finish_reason": "tool_calls"},
        id="ai-1",
    ),
    ToolMessage(WEATHER, tool_call_id="call_a", name="get_weather"),
    ToolMessage("cloudy", tool_call_id="call_b", status="success"),
    AIMessage("A single pixel; rain in Oslo, clouds in Bergen.", usage_metadata=None),
]


def test_messages_come_back_equal_to_what_was_added(history):
    memory = history("round-trip")

    memory.add_messages(CONVERSATION[:3])
    memory.add_messages(CONVERSATION[3:])

    assert history("round-trip").messages == CONVERSATION


def test_the_async_methods_round_trip_too(history):
    memory = history("async-round-trip")

    async def scenario() -> tuple[list[BaseMessage], list[BaseMessage]]:
        await memory.aadd_messages(CONVERSATION)
        stored = await memory.aget_messages()
        await memory.aclear()
        return stored, await memory.aget_messages()

    stored, cleared = asyncio.run(scenario())

    assert stored == CONVERSATION
    assert cleared == []


def test_messages_are_stored_in_openai_chat_format(history, client_tenant):
    history("chat-form").add_messages(CONVERSATION)

    stored = stored_messages(client_tenant, "chat-form")
    chat = [{key: m[key] for key in ("role", "content", "tool_calls", "tool_call_id") if m[key]} for m in stored]
    assert chat == [
        {"role": "system", "content": "Be brief."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is in this picture?"},
                {"type": "image_url", "image_url": {"url": PNG_DATA_URL}},
            ],
        },
        {
            "role": "assistant",
            "content": "Let me check the weather too.",
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
        {"role": "tool", "content": "cloudy", "tool_call_id": "call_b"},
        {"role": "assistant", "content": "A single pixel; rain in Oslo, clouds in Bergen."},
    ]


def test_clear_empties_the_history_and_an_unknown_one_is_empty(history, client_tenant):
    memory = history("to-clear")
    memory.add_messages(CONVERSATION[:2])

    memory.clear()

    assert memory.messages == []
    assert history("never-written").messages == []
    assert client_tenant.client.get("/api/v1/sessions/", {"external_id": "never-written"}).json()["count"] == 0


def test_messages_other_clients_wrote_are_read_as_langchain_messages(history, client_tenant):
    memory = history("shared")
    memory.add_messages([HumanMessage("What is the weather in Oslo?")])
    found = client_tenant.client.get("/api/v1/sessions/", {"external_id": "shared"}).json()["results"][0]
    other = [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": WEATHER},
    ]
    response = client_tenant.client.post(f"/api/v1/sessions/{found['id']}/messages/", {"messages": other}, "json")
    assert response.status_code == 201, response.content

    read = memory.messages

    assert read[0] == HumanMessage("What is the weather in Oslo?")
    assert isinstance(read[1], AIMessage)
    assert read[1].tool_calls == [{"id": "call_1", "name": "get_weather", "args": {}, "type": "tool_call"}]
    assert isinstance(read[2], ToolMessage)
    assert (read[2].tool_call_id, read[2].content) == ("call_1", WEATHER)
