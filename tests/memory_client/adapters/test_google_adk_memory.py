"""MemsiteMemoryService as Google ADK's memory: ADK's own Runner, a scripted model, a live server.

The model is a BaseLlm that answers from a script (text, or a call of ADK's `load_memory` tool)
and keeps every request, so a test sees what the tool gave the model. What the server stores is
indexed by the in-process worker when the test asks (`indexer`), as the search worker would.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import AsyncGenerator, Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from google.adk.agents import LlmAgent
from google.adk.events.event import Event
from google.adk.memory.memory_entry import MemoryEntry
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.sessions.in_memory_session_service import InMemorySessionService
from google.adk.sessions.session import Session
from google.adk.tools import load_memory, preload_memory
from google.genai import types

from memory_app.search import services as search_index
from memory_app.tenancy.models import ApiKey
from memory_client.adapters.google_adk import MemsiteMemoryService, memory_external_id
from tests.conftest import Tenant, make_tenant
from tests.memory_client.adapters.gemini_server import GeminiReply, ScriptedGeminiServer
from tests.memory_client.adapters.test_readme_examples import ROOT, example

APP = "travel"
ADA_HOME = "I am Ada and I live in Oslo, by the fjord."


class ScriptedModel(BaseLlm):
    """ADK's model interface answering from a script; every request it gets is kept."""

    model: str = "scripted"
    replies: list[types.Content] = []
    requests: list[LlmRequest] = []

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self.requests.append(llm_request)
        yield LlmResponse(content=self.replies.pop(0))


def text(words: str, role: str = "model") -> types.Content:
    return types.Content(role=role, parts=[types.Part(text=words)])


def calls_load_memory(query: str) -> types.Content:
    call = types.FunctionCall(name="load_memory", args={"query": query}, id="call-memory")
    return types.Content(role="model", parts=[types.Part(function_call=call)])


def function_responses(request: LlmRequest) -> list[types.FunctionResponse]:
    return [
        part.function_response for content in request.contents for part in content.parts or [] if part.function_response
    ]


@pytest.fixture
def make_service(memsite_env: dict[str, str]) -> Iterator[Callable[..., MemsiteMemoryService]]:
    made: list[MemsiteMemoryService] = []

    def make(**kwargs: Any) -> MemsiteMemoryService:
        service = MemsiteMemoryService(**{**memsite_env, **kwargs})
        made.append(service)
        return service

    yield make
    for service in made:
        service.close()


class Concierge:
    """ADK's Runner over an LlmAgent with a memory tool (load_memory unless told), its sessions in
    ADK's in-memory service and its memory in MemsiteMemoryService."""

    def __init__(self, memory: MemsiteMemoryService, *replies: types.Content, tool: Any = load_memory) -> None:
        self.model = ScriptedModel(replies=list(replies))
        agent = LlmAgent(name="concierge", model=self.model, instruction="Help the traveller.", tools=[tool])
        self.sessions = InMemorySessionService()
        self.memory = memory
        self.runner = Runner(
            agent=agent, app_name=APP, session_service=self.sessions, memory_service=memory, auto_create_session=True
        )

    def ask(self, user_id: str, session_id: str, words: str) -> list[Event]:
        async def run() -> list[Event]:
            message = text(words, role="user")
            return [
                event
                async for event in self.runner.run_async(user_id=user_id, session_id=session_id, new_message=message)
            ]

        return asyncio.run(run())

    def session(self, user_id: str, session_id: str) -> Session:
        found = asyncio.run(self.sessions.get_session(app_name=APP, user_id=user_id, session_id=session_id))
        assert found is not None
        return found

    def remember(self, user_id: str, session_id: str) -> None:
        asyncio.run(self.memory.add_session_to_memory(self.session(user_id, session_id)))


def search(memory: MemsiteMemoryService, query: str, *, user_id: str = "ada", app_name: str = APP) -> list[MemoryEntry]:
    return asyncio.run(memory.search_memory(app_name=app_name, user_id=user_id, query=query)).memories


def memory_session(tenant: Tenant, app_name: str, user_id: str) -> dict[str, Any]:
    external_id = memory_external_id(app_name, user_id)
    found = tenant.client.get("/api/v1/sessions/", {"external_id": external_id}).json()["results"]
    assert len(found) == 1
    return found[0]


def stored_rows(tenant: Tenant, app_name: str, user_id: str) -> list[dict[str, Any]]:
    session = memory_session(tenant, app_name, user_id)
    return tenant.client.get(f"/api/v1/sessions/{session['id']}/messages/").json()["results"]


def test_load_memory_finds_what_an_earlier_session_said(make_service, indexer):
    memory = make_service()
    concierge = Concierge(
        memory,
        text("Nice to meet you, Ada."),
        calls_load_memory("where does Ada live"),
        text("You live in Oslo."),
    )
    concierge.ask("ada", "first-trip", ADA_HOME)
    concierge.remember("ada", "first-trip")
    indexer()

    answer = concierge.ask("ada", "second-trip", "Where do I live?")

    assert answer[-1].content.parts[0].text == "You live in Oslo."
    (response,) = function_responses(concierge.model.requests[-1])
    assert response.name == "load_memory"
    # ADK hands the model the tool's LoadMemoryResponse: MemsiteMemoryService's entries as they are.
    memories: list[MemoryEntry] = response.response["result"].memories
    said_by_ada = next(entry for entry in memories if entry.author == "user")
    assert said_by_ada.content == text(ADA_HOME, role="user")
    first_event = concierge.session("ada", "first-trip").events[0]
    assert datetime.fromisoformat(said_by_ada.timestamp) == datetime.fromtimestamp(first_event.timestamp, tz=UTC)
    assert {entry.author for entry in memories} <= {"user", "concierge"}


def test_preload_memory_gives_the_model_what_an_earlier_session_said(make_service, indexer):
    memory = make_service()
    concierge = Concierge(memory, text("Nice to meet you, Ada."), text("Oslo, then."), tool=preload_memory)
    concierge.ask("ada", "first-trip", ADA_HOME)
    concierge.remember("ada", "first-trip")
    indexer()

    concierge.ask("ada", "second-trip", "Does Ada live in Oslo?")

    request = concierge.model.requests[-1]
    past = next(
        part.text
        for content in request.contents
        for part in content.parts or []
        if "PAST_CONVERSATIONS" in (part.text or "")
    )
    assert f"user: {ADA_HOME}" in past
    said_at = concierge.session("ada", "first-trip").events[0].timestamp
    assert f"Time: {datetime.fromtimestamp(said_at, tz=UTC).isoformat()}" in past


def test_a_remembered_session_is_one_message_per_event_of_the_apps_memory_of_the_user(
    make_service, client_tenant, indexer
):
    memory = make_service()
    concierge = Concierge(memory, calls_load_memory("seats"), text("Noted: a window seat."))
    concierge.ask("ada", "booking", "Ada prefers window seats.")

    concierge.remember("ada", "booking")

    session = memory_session(client_tenant, APP, "ada")
    assert session["external_id"] == "adk-memory:travel:ada"
    assert session["metadata"] == {"adk": {"app_name": APP, "user_id": "ada"}}
    rows = stored_rows(client_tenant, APP, "ada")
    # The load_memory call and its response are the agent's plumbing: only what was said is kept.
    assert [(row["role"], row["name"], row["content"]) for row in rows] == [
        ("user", "user", "Ada prefers window seats."),
        ("assistant", "concierge", "Noted: a window seat."),
    ]
    events = [event for event in concierge.session("ada", "booking").events if event.content.parts[0].text]
    assert [row["meta"]["adk"]["event_id"] for row in rows] == [event.id for event in events]
    assert {row["meta"]["adk"]["session_id"] for row in rows} == {"booking"}
    assert [datetime.fromisoformat(row["occurred_at"]) for row in rows] == [
        datetime.fromtimestamp(event.timestamp, tz=UTC) for event in events
    ]


def test_adding_a_session_again_stores_only_its_new_events_whichever_process_adds_it(make_service, client_tenant):
    memory = make_service()
    concierge = Concierge(memory, text("Oslo it is."), text("Two nights, then."))
    concierge.ask("ada", "trip", "Book Oslo.")
    concierge.remember("ada", "trip")
    concierge.ask("ada", "trip", "Two nights please.")
    another_process = make_service()

    # The other process has stored none of it: its batch mixes stored and new events.
    asyncio.run(another_process.add_session_to_memory(concierge.session("ada", "trip")))
    concierge.remember("ada", "trip")  # the first process sends only the new events: stored already
    asyncio.run(another_process.add_session_to_memory(concierge.session("ada", "trip")))

    rows = stored_rows(client_tenant, APP, "ada")
    assert [row["content"] for row in rows] == ["Book Oslo.", "Oslo it is.", "Two nights please.", "Two nights, then."]


def test_search_finds_only_the_memories_of_that_app_and_user(make_service, indexer):
    memory = make_service()
    concierge = Concierge(memory, text("Noted."), text("Noted."), text("Noted."))
    concierge.ask("ada", "one", "My passport number ends in 4242.")
    concierge.ask("bob", "two", "My passport number ends in 7777.")
    concierge.remember("ada", "one")
    concierge.remember("bob", "two")
    other_app = [Event(author="user", content=text("My passport number ends in 9999.", role="user"))]
    asyncio.run(memory.add_events_to_memory(app_name="hotels", user_id="ada", events=other_app, session_id="h"))
    indexer()

    def found(user_id: str, app_name: str = APP) -> list[str]:
        """The passports found (the vector engine brings the user's "Noted." along, ranked below)."""
        entries = search(memory, "passport number", user_id=user_id, app_name=app_name)
        return [entry.content.parts[0].text for entry in entries if "passport" in entry.content.parts[0].text]

    assert found("ada") == ["My passport number ends in 4242."]
    assert found("bob") == ["My passport number ends in 7777."]
    assert found("ada", "hotels") == ["My passport number ends in 9999."]
    assert found("carol") == []
    assert search(memory, "   ") == []


def test_the_teams_read_key_finds_its_adk_memories_and_another_teams_key_finds_none(make_service, server_url, indexer):
    memory = make_service()
    concierge = Concierge(memory, text("Noted."))
    concierge.ask("ada", "one", "The safe code is 1234.")
    concierge.remember("ada", "one")
    indexer()
    assert search(memory, "safe code")
    # The team's read key searches its memories too; another team's key finds none of them.
    reader = make_tenant("client-alpha", role=ApiKey.Role.READ)
    best = search(make_service(api_key=reader.key), "safe code")[0]
    assert best.content.parts[0].text == "The safe code is 1234."
    intruder = make_tenant("client-beta")

    other_team = make_service(api_key=intruder.key)

    assert search(other_team, "safe code") == []
    answer = intruder.client.post("/api/v1/search/", {"query": "safe code"}, format="json").json()
    assert answer["results"] == []
    assert intruder.client.get("/api/v1/sessions/", {"external_id": "adk-memory:travel:ada"}).json()["results"] == []


def test_add_memory_stores_explicit_memories_once_with_author_timestamp_and_metadata(
    make_service, client_tenant, indexer
):
    memory = make_service()
    entry = MemoryEntry(
        id="seat-preference",
        content=text("Ada always books an aisle seat on night trains."),
        author="concierge",
        timestamp="2026-03-01T08:30:00+01:00",
        custom_metadata={"source": "profile"},
    )

    asyncio.run(memory.add_memory(app_name=APP, user_id="ada", memories=[entry]))
    asyncio.run(make_service().add_memory(app_name=APP, user_id="ada", memories=[entry]))
    indexer()

    assert len(stored_rows(client_tenant, APP, "ada")) == 1
    (found,) = search(memory, "aisle seat night train")
    assert found.content == entry.content
    assert found.author == "concierge"
    assert datetime.fromisoformat(found.timestamp) == datetime.fromisoformat("2026-03-01T08:30:00+01:00")
    assert found.custom_metadata == {"source": "profile"}
    assert found.id == stored_rows(client_tenant, APP, "ada")[0]["message_id"]
    # memsite finds memories by their words: one without text is refused, and nothing is stored.
    picture = MemoryEntry(
        content=types.Content(role="user", parts=[types.Part(function_call=types.FunctionCall(name="x"))])
    )
    with pytest.raises(ValueError, match="needs text"):
        asyncio.run(memory.add_memory(app_name=APP, user_id="ada", memories=[picture]))
    assert len(stored_rows(client_tenant, APP, "ada")) == 1


def test_add_events_keeps_text_without_thoughts_and_tool_traffic_with_the_calls_metadata(
    make_service, client_tenant, indexer
):
    memory = make_service()
    call = types.Part(function_call=types.FunctionCall(name="book", args={"city": "Oslo"}))
    events = [
        Event(author="user", content=text("Find me a hotel in Bergen.", role="user")),
        Event(
            author="concierge",
            content=types.Content(
                role="model",
                parts=[
                    types.Part(text="thinking about hotels", thought=True),
                    types.Part(text="Hotel Bryggen is free."),
                    call,
                ],
            ),
        ),
        Event(author="concierge", content=types.Content(role="model", parts=[call])),
        Event(author="concierge"),
    ]

    asyncio.run(
        memory.add_events_to_memory(
            app_name=APP, user_id="ada", events=events, session_id="s-1", custom_metadata={"channel": "web"}
        )
    )
    indexer()

    assert [row["content"] for row in stored_rows(client_tenant, APP, "ada")] == [
        "Find me a hotel in Bergen.",
        "Hotel Bryggen is free.",
    ]
    hotel = next(entry for entry in search(memory, "hotel Bergen Bryggen") if entry.author == "concierge")
    assert hotel.content == text("Hotel Bryggen is free.")
    assert hotel.custom_metadata == {"channel": "web"}


@pytest.fixture
def gemini_server() -> Iterator[ScriptedGeminiServer]:
    server = ScriptedGeminiServer().start()
    yield server
    server.stop()


def test_the_docs_example_runs_and_its_second_session_loads_the_first_ones_memory(
    server_url, client_tenant, gemini_server, run_jobs_inline
):
    # The search worker indexes each message as soon as the server queues it, as a running one does.
    run_jobs_inline(search_index.JOB).background = True
    gemini_server.script(
        GeminiReply("Nice to meet you, Ada."),
        GeminiReply(calls=[{"name": "load_memory", "args": {"query": "where Ada lives"}}]),
        GeminiReply("You live in Oslo."),
    )
    env = {
        **os.environ,
        "MEMSITE_URL": server_url,
        "MEMSITE_API_KEY": client_tenant.key,
        "GOOGLE_API_KEY": "gemini-example-key",
        "GOOGLE_GEMINI_BASE_URL": gemini_server.base_url,
    }

    done = subprocess.run(
        [sys.executable, "-c", example("google-adk")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["Nice to meet you, Ada.", "You live in Oslo."]
    last = gemini_server.requests[-1]["contents"]
    (answer,) = [
        part["functionResponse"] for content in last for part in content["parts"] if "functionResponse" in part
    ]
    assert answer["name"] == "load_memory"
    assert "Hello, I am Ada and I live in Oslo." in str(answer["response"])


def test_app_and_user_names_map_to_external_ids_that_never_collide():
    assert memory_external_id("travel", "ada") == "adk-memory:travel:ada"
    assert memory_external_id("a:b", "c") == "adk-memory:a%3Ab:c"
    assert memory_external_id("a", "b:c") == "adk-memory:a:b%3Ac"
    with pytest.raises(ValueError, match="non-empty"):
        memory_external_id("travel", "")
    with pytest.raises(ValueError, match="over 200 characters"):
        memory_external_id("travel", "u" * 190)
