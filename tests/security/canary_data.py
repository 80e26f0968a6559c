"""Real data carrying a canary string in every text field, made through the API and the services.

`fill_session` builds one session with everything a session can hold (messages with every
optional field, rounds with posts and attachments, shared memory, scratch, agent memory with
an archive, a compaction done by the offline backend, facts from an extraction and by hand,
a quarantined extraction with its raw output, events, an experience selection with
`session_id`); `fill_team` adds the team-level rows (experiences with revisions, the
experience config, key names, team-wide facts). Task sending is recorded, not brokered: the
jobs are run in-process by the test, the same service functions a worker calls.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from rest_framework.test import APIClient

from experiences_app import services as experience_services
from memory_app.agent_records import services as agent_memory
from memory_app.agent_records.services import ArchivePolicy
from memory_app.compaction import services as compaction
from memory_app.compaction.models import CompactionRun
from memory_app.facts import extraction as fact_extraction
from memory_app.facts.models import FactExtractionRun
from memory_app.models import AgentMemory
from memory_app.tenancy import services as tenancy
from memory_app.tenancy.models import ApiKey, Team
from tests.conftest import make_tenant
from tests.llm_server import Reply, ScriptedLLMServer

PNG_DATA_URL = (
    "data:image/png;base64,"
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


@dataclass
class Filled:
    session_id: str
    tables_expected: set[str] = field(default_factory=set)


def _ok(response: Any, status: int = 201) -> dict[str, Any]:
    assert response.status_code == status, (response.status_code, response.content[:500])
    return response.json() if response.content else {}


def admin_client_of(team: Team) -> APIClient:
    return make_tenant(team.name, role=ApiKey.Role.ADMIN).client


def fill_session(
    *, client: APIClient, admin: APIClient, team: Team, canary: str, settings: Any, llm_server: ScriptedLLMServer
) -> Filled:
    """One session holding `canary` in every text field a client can write, plus the job rows."""
    c = canary
    session = _ok(
        client.post(
            "/api/v1/sessions/",
            {
                "system_prompt": f"system {c}",
                "external_id": f"ext-{c}",
                "metadata": {"note": c},
                "additional_state": {"state": c},
                "memory_type": "managed_conversation",
                "memory_config": {"threshold_tokens": 100000},
            },
            format="json",
        )
    )
    sid = session["id"]
    base = f"/api/v1/sessions/{sid}"
    messages = [
        {"role": "user", "content": f"My name is Ada {c}. I live in Oslo {c}.", "name": f"user-{c}"[:64]},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": json.dumps({"q": c})}}
            ],
            "reasoning_details": [{"type": "reasoning.text", "text": c}],
            "meta": {"note": c},
        },
        {"role": "tool", "tool_call_id": "call_1", "content": f"tool result {c}"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": f"Ada {c} lives in Oslo."},
                {"type": "image_url", "image_url": {"url": PNG_DATA_URL}},
            ],
            "structured_data": {"answer": c},
            "agent_calls": [{"agent_name": "helper", "request": c}],
            "send_from": "Planner",
            "send_to": "User",
        },
        {"role": "user", "content": f"Please remember {c} for later.", "images": [PNG_DATA_URL]},
        # Long enough that a summary is shorter than what it stands for (else a compaction fails).
        *[
            {"role": role, "content": f"{role} notes on the trip {i}: " + "the museum opens at nine " * 30}
            for i in range(4)
            for role in ("user", "assistant")
        ],
        {"role": "assistant", "content": f"Noted: {c}."},
    ]
    _ok(client.post(f"{base}/messages/", {"messages": messages}, format="json"))

    # Rounds, posts with attachments, shared memory and scratch memory.
    round_ = _ok(client.post(f"{base}/rounds/", {"user_query": f"query {c}"}, format="json"))
    _ok(
        client.post(
            f"{base}/scratch/", {"action": f"act {c}", "observation": f"obs {c}", "duration": 1.5}, format="json"
        )
    )
    _ok(
        client.post(
            f"{base}/rounds/{round_['id']}/posts/",
            {
                "message": f"post {c}",
                "send_from": "Planner",
                "send_to": "CodeInterpreter",
                "attachment_list": [
                    {"type": "plan", "content": f"plan {c}"},
                    {"type": "thought", "content": f"thought {c}"},
                    {
                        "type": "shared_memory_entry",
                        "content": f"shared {c}",
                        "extra": {"type": "plan", "scope": "conversation", "content": f"carried {c}"},
                    },
                ],
            },
            format="json",
        )
    )
    _ok(
        client.post(
            f"{base}/shared-memory/",
            {"type": "plan", "content": f"entry {c}", "scope": "conversation", "created_by": "Planner"},
            format="json",
        )
    )

    # Agent work records, then an archive of the older entries.
    agent_url = f"{base}/agents/developer/memory/"
    for hour, kind, body in [
        (1, "discoveries/", {"type": "api_surface", "content": f"discovery {c}"}),
        (
            2,
            "attempts/",
            {
                "planStep": 1,
                "description": f"d {c}",
                "approach": f"approach {c}",
                "result": "failure",
                "error": f"e {c}",
            },
        ),
        (3, "decisions/", {"type": "skip", "description": f"decision {c}"}),
        (9, "discoveries/", {"type": "code_pattern", "content": f"late discovery {c}"}),
    ]:
        body["timestamp"] = f"2026-01-23T{hour:02d}:00:00.000Z"
        _ok(client.post(agent_url + kind, body, format="json"))
    memory = AgentMemory.objects.get(session_id=sid, agent="developer")
    zero = timedelta(0)
    moved = agent_memory.agent_memory_archive(
        memory_id=memory.pk,
        policy=ArchivePolicy(
            retention=zero, long_session=zero, small_session=zero, small_max_bytes=1, medium_max_bytes=1
        ),
    )
    assert moved > 0

    # A compaction done by the offline (extractive) backend: its summary quotes the messages.
    settings.LLM_BASE_URL = ""
    run = _ok(client.post(f"{base}/compact/"), 202)
    outcome = compaction.compaction_execute(run_id=run["id"])
    assert outcome == "done", (outcome, CompactionRun.objects.get(pk=run["id"]).error)
    assert CompactionRun.objects.get(pk=run["id"]).status == "done"

    # Facts: an offline extraction over the messages, one by hand, and a quarantined LLM run.
    run = _ok(client.post(f"{base}/extract-facts/", {}, format="json"), 202)
    fact_extraction.fact_extraction_execute(run_id=run["id"])
    _ok(
        client.post(
            "/api/v1/facts/",
            {"role": "user", "subject": f"Ada {c}", "predicate": "likes", "object": f"tea {c}", "session": sid},
            format="json",
        )
    )
    settings.LLM_BASE_URL = llm_server.base_url
    llm_server.script(Reply(f"not json at all {c}"))
    run = _ok(
        client.post(f"{base}/extract-facts/", {"text": f"Ada {c} works at Acme", "role": "user"}, format="json"), 202
    )
    fact_extraction.fact_extraction_execute(run_id=run["id"])
    assert FactExtractionRun.objects.get(pk=run["id"]).raw_output

    # An experience selection that reads the session's context (logged with session_id).
    experience_services.experience_create(
        team=team, exp_id="canary-exp", who=[], when="when planning anything", what="be careful", actor="test",
        status="approved",
    )  # fmt: skip
    llm_server.script(Reply(json.dumps({"canary-exp": True, "why": c})))
    _ok(
        client.post(
            "/api/v1/experiences/select/", {"role": "Planner", "query": f"plan {c}", "session_id": sid}, format="json"
        ),
        200,
    )
    index_everything()
    return Filled(session_id=sid)


def index_everything() -> None:
    """What the search index's worker does: every pending index run, so recall holds the canary too."""
    from memory_app.search import services as search
    from memory_app.search.models import IndexRun

    search.search_index_sweep()
    for run in IndexRun.objects.filter(status=IndexRun.Status.PENDING):
        search.search_index_execute(run_id=str(run.pk))


def fill_team(*, team: Team, admin: APIClient, canary: str) -> None:
    """Team-level rows with the canary: experiences (and revisions), the config, keys, team-wide facts."""
    c = canary
    _ok(
        admin.post(
            "/api/v1/experiences/",
            {"exp_id": "team-canary", "who": [f"role-{c}"], "when": f"when {c}", "what": f"what {c}"},
            format="json",
        )
    )
    _ok(admin.patch("/api/v1/experiences/team-canary/", {"what": f"what again {c}"}, format="json"), 200)
    _ok(
        admin.put(
            "/api/v1/experiences/config/", {"selection_template": f"{{experiences}} {c} {{user_query}}"}, format="json"
        ),
        200,
    )
    _ok(
        admin.post(
            "/api/v1/facts/",
            {"role": "user", "subject": f"team {c}", "predicate": "uses", "object": f"tool {c}"},
            format="json",
        )
    )

    tenancy.api_key_create(team=team, name=f"key {c}"[:100], agent_name=f"agent {c}"[:100])
