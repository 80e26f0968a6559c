"""A team's memory as a new user would find it after a week of real use, for the tests that
visit every dashboard page: a 240-message coding session with tool calls, long console output,
markdown and images; a managed session compacted five times; a kg session with extracted facts;
a multi-agent session with rounds and agent records; experiences in every state with selections;
two webhooks with a delivery log; and a second team whose rows must never show.

Built with the services (as the API would), before the browser starts.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

from memory_app.compaction import services as compaction
from memory_app.compaction.models import CompactionRun
from memory_app.conversations import services
from memory_app.conversations.models import MemoryType, Session
from memory_app.events.models import MemoryEvent
from memory_app.events.services import event_record
from memory_app.facts import extraction
from memory_app.facts.models import FactExtractionRun
from memory_app.memory_files import services as memory_files
from memory_app.memory_files.models import MemoryFile
from memory_app.tenancy.models import Team
from memory_app.webhooks import services as webhooks
from tests.browser_kit import member
from tests.memory_app.agent_records.agents_data import build_agents_world
from tests.memory_app.conversations.test_browser import gradient_png

CONSOLE = "\n".join(
    [f"tests/test_auth.py::test_case_{n:03d} PASSED                                   [{n:3d}%]" for n in range(1, 61)]
    + ["FAILED tests/test_auth.py::test_hash - AssertionError: expected bcrypt prefix '$2b$', got 'plain'"]
)
MARKDOWN = (
    "## Plan\n\n1. Read `auth/login.py`\n2. Hash passwords with **bcrypt**\n3. Run the tests\n\n"
    "```python\nhashed = bcrypt.hashpw(password, bcrypt.gensalt())\n```\n\nSee [the docs](https://example.com/bcrypt)."
)


@dataclass
class World:
    team: Team
    coding: Session
    managed: Session
    kg: Session
    rounds: Session
    agent_session: Session  # where the agent below kept its record
    extraction_run: FactExtractionRun
    compaction_runs: list[CompactionRun]
    agent: str
    exp_ids: list[str]
    memory_file_id: int = 0  # a memory file with a few versions

    def kwargs(self) -> dict[str, str]:
        """Real values for every URL kwarg of the dashboard's pages."""
        return {
            "session_id": str(self.agent_session.pk),
            "run_id": str(self.extraction_run.pk),
            "agent": self.agent,
            "exp_id": self.exp_ids[0],
            "kind": "compaction",
            "job_id": str(self.compaction_runs[-1].pk),
            "file_id": str(self.memory_file_id),
        }


def _serve_a_context(team: Team, session: Session) -> None:
    """An agent reads the managed session's context through the API: its usage row and the
    record that replays it (the served-context page)."""
    from rest_framework.test import APIClient

    from memory_app.tenancy import services as tenancy

    _, raw = tenancy.api_key_create(team=team, name="world-agent")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert client.get(f"/api/v1/sessions/{session.pk}/context/").status_code == 200


def _coding_turn(turn: int, image: str) -> list[dict[str, Any]]:
    call_id = f"call_{turn}"
    user: dict[str, Any] = {"role": "user", "content": f"Step {turn}: make the login tests pass."}
    if turn % 15 == 0:
        user["content"] = [
            {"type": "text", "text": f"Step {turn}: here is the failing screen."},
            {"type": "image_url", "image_url": {"url": image}},
        ]
    return [
        user,
        {
            "role": "assistant",
            "name": "developer",
            "content": None,
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {
                        "name": "run_tests" if turn % 2 else "read_file",
                        "arguments": json.dumps({"path": "tests/test_auth.py", "verbose": True, "step": turn}),
                    },
                }
            ],
        },
        {"role": "tool", "tool_call_id": call_id, "name": "run_tests" if turn % 2 else "read_file", "content": CONSOLE},
        {"role": "assistant", "name": "developer", "content": MARKDOWN},
    ]


def _coding_session(team: Team) -> Session:
    session = services.session_create(
        team=team,
        external_id="coding-session-240",
        system_prompt="You are a careful developer. Run the tests after every change.",
        metadata={"agent_name": "developer"},
    )
    image = "data:image/png;base64," + base64.b64encode(gradient_png()).decode()
    for turn in range(1, 61):
        services.message_append(session=session, messages=_coding_turn(turn, image))
    return session


def _managed_session(team: Team) -> tuple[Session, list[CompactionRun]]:
    session = services.session_create(
        team=team,
        external_id="trip-planner-managed",
        system_prompt="You are a travel planner.",
        memory_type=MemoryType.MANAGED_CONVERSATION,
        memory_config={"threshold_tokens": 400},
    )
    runs = []
    for round_ in range(5):
        services.message_append(
            session=session,
            messages=[
                {"role": "user" if n % 2 == 0 else "assistant", "content": f"Leg {round_}.{n}: Oslo to Bergen " * 12}
                for n in range(8)
            ],
        )
        run, _ = compaction.compaction_request(session=session, trigger=CompactionRun.Trigger.MANUAL)
        compaction.compaction_execute(run_id=str(run.pk))
        run.refresh_from_db()
        runs.append(run)
    services.message_append(session=session, messages=[{"role": "user", "content": "And the hotel in Bergen?"}])
    return session, runs


def _kg_session(team: Team) -> tuple[Session, FactExtractionRun]:
    session = services.session_create(team=team, external_id="customer-kg", memory_type=MemoryType.KG)
    services.message_append(
        session=session,
        messages=[
            {"role": "user", "content": "I live in Oslo and I work at Acme as a data engineer."},
            {"role": "assistant", "content": "Noted: you live in Oslo and work at Acme."},
            {"role": "user", "content": "My manager is Kari. I prefer Python over Java."},
        ],
    )
    run = extraction.fact_extraction_request(session=session)
    extraction.fact_extraction_execute(run_id=str(run.pk))
    run.refresh_from_db()
    return session, run


def _experiences(team: Team) -> list[str]:
    from experiences_app import services as experiences
    from experiences_app.models import Experience

    rows = [
        ("check-files-first", ["developer"], "When a file is read.", "Check the path exists first.", "approved"),
        ("bcrypt-for-passwords", ["developer", "reviewer"], "When passwords are stored.", "Use bcrypt.", "approved"),
        ("plot-axes", ["analyst"], "When plotting.", "Label both axes with units.", "draft"),
    ]
    for exp_id, who, when, what, status in rows:
        experiences.experience_create(team=team, exp_id=exp_id, who=who, when=when, what=what, actor="ada")
        if status == "approved":
            experiences.experience_approve(experience=Experience.objects.get(team=team, exp_id=exp_id), actor="ada")
    return [row[0] for row in rows]


def _webhooks(team: Team, session: Session) -> None:
    webhooks.webhook_create(
        team=team, url="https://hooks.example.com/memsite/compaction", actor="ada", description="ops alerts"
    )
    webhooks.webhook_create(team=team, url="https://hooks.example.com/kg", actor="ada", event_kinds=["facts_extracted"])
    for index in range(4):
        event_record(
            team_id=team.pk, session=session, kind=MemoryEvent.Kind.COMPACTION_FAILED, data={"run_id": f"run-{index}"}
        )


def _memory_files(team: Team) -> int:
    """A developer's notes edited twice and a shared runbook: the memory-file pages' rows and diff."""
    developer = memory_files.Owner(team=team, agent="developer", author="developer")
    path = "/memories/notes/auth-refactor.md"
    for command in (
        {"command": "create", "path": path, "file_text": "# Auth refactor\n- login uses md5\n- tests are slow\n"},
        {"command": "str_replace", "path": path, "old_str": "md5", "new_str": "bcrypt (done)"},
        {"command": "insert", "path": path, "insert_line": 3, "insert_text": "- next: rotate the session secret"},
    ):
        memory_files.memory_file_command(owner=developer, command=command)
    shared = memory_files.Owner(team=team, agent="", author="key:world")
    memory_files.memory_file_command(
        owner=shared,
        command={
            "command": "create",
            "path": "/memories/runbooks/deploy.md",
            "file_text": "Two approvals, then ship.\n",
        },
    )
    return MemoryFile.objects.get(team=team, path=path).pk


def build_world() -> World:
    team, _ = member("demo", "ada", admin=True)
    other, _ = member("other-team", "bob", admin=True)
    services.session_create(team=other, external_id="other-teams-secret-session")
    coding = _coding_session(team)
    managed, runs = _managed_session(team)
    kg, run = _kg_session(team)
    agents = build_agents_world(team)
    exp_ids = _experiences(team)
    _webhooks(team, managed)
    _serve_a_context(team, managed)
    memory_file_id = _memory_files(team)
    return World(
        team=team,
        coding=coding,
        managed=managed,
        kg=kg,
        rounds=agents.rounds_session,
        agent_session=agents.rounds_session,
        extraction_run=run,
        compaction_runs=runs,
        agent="developer",
        exp_ids=exp_ids,
        memory_file_id=memory_file_id,
    )
