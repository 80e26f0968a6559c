"""A multi-agent session for the dashboard tests: three rounds of posts with typed attachments,
shared memory in both scopes, and two agents' work records (the agent memory reference documents), one with an
archived entry. Built through the same services the API calls."""

from __future__ import annotations

from datetime import timedelta

from memory_app.agent_records import documents as agent_memory_yaml
from memory_app.agent_records import services as agent_memory
from memory_app.conversations import services
from memory_app.conversations.models import Session
from memory_app.rounds import services as rounds
from memory_app.tenancy.models import Team
from tests.memory_app.agent_records.documents import examples_document, main_document

CODE = "import pandas as pd\ndf = pd.read_csv('sales.csv')\nprint(len(df))"
OLD_DISCOVERY = {
    "id": "discovery-000",
    "timestamp": "2026-01-23T04:00:00.000Z",
    "type": "dependency_check",
    "importance": "low",
    "content": "The repository pins Deno 1.x in its CI image.",
}
FAILED_ATTEMPT = {
    "id": "attempt-003",
    "timestamp": "2026-01-23T10:34:00.000Z",
    "planStep": 2,
    "description": "Hash passwords with argon2",
    "approach": "Swap bcrypt for argon2 in src/auth/login.ts",
    "commands": ["deno add argon2"],
    "result": "failure",
    "error": "Error: new dependencies are not allowed in this repository",
    "lessons": ["Check constraints before adding a dependency", "bcrypt is already available"],
}
BLOCKER = "The session store API is not documented yet"
# Archive entries more than 2 hours older than the newest, once the memory spans over 4 hours.
ARCHIVE_POLICY = agent_memory.ArchivePolicy(
    retention=timedelta(hours=2),
    long_session=timedelta(hours=4),
    small_session=timedelta(hours=2),
    small_max_bytes=50_000,
    medium_max_bytes=100_000,
)


def _post(round_, message: str, send_from: str, send_to: str, *attachments: tuple[str, str, dict | None]) -> None:
    rounds.post_create(
        round_=round_,
        post={
            "message": message,
            "send_from": send_from,
            "send_to": send_to,
            "attachment_list": [{"type": t, "content": c, "extra": e} for t, c, e in attachments],
        },
    )


def build_multi_agent_session(team: Team, external_id: str = "sales-analysis") -> Session:
    session = services.session_create(team=team, external_id=external_id, system_prompt="You analyse data.")

    first, _ = rounds.round_create(session=session, user_query="How many rows does sales.csv have?")
    _post(first, "How many rows does sales.csv have?", "User", "Planner")
    _post(
        first,
        "Please load sales.csv and count its rows.",
        "Planner",
        "CodeInterpreter",
        ("plan", "1. load sales.csv\n2. count the rows\n3. report the count", None),
        ("current_plan_step", "1. load sales.csv", None),
        (
            "shared_memory_entry",
            "the plan",
            {"type": "plan", "content": "load, count, report", "scope": "conversation"},
        ),
    )
    _post(
        first,
        "The file has 1042 rows.",
        "CodeInterpreter",
        "Planner",
        ("thought", "A DataFrame's length is its row count.", None),
        ("reply_content", CODE, None),
        ("execution_status", "success", None),
        ("execution_result", "1042", None),
    )
    _post(first, "sales.csv has 1042 rows.", "Planner", "User")
    rounds.round_set_state(round_=first, state="finished")

    second, _ = rounds.round_create(session=session, user_query="Plot the monthly revenue.")
    _post(second, "Plot the monthly revenue.", "User", "Planner")
    _post(second, "Group by month and plot the revenue column.", "Planner", "CodeInterpreter")
    _post(
        second,
        "The revenue column does not exist.",
        "CodeInterpreter",
        "Planner",
        ("code_error", "KeyError: 'revenue'", None),
        ("revise_message", "Use the amount column instead.", None),
    )
    rounds.round_set_state(round_=second, state="failed")
    rounds.shared_memory_entry_create(
        session=session, type="note", content="amount, not revenue", scope="round", round_=second, created_by="Planner"
    )

    third, _ = rounds.round_create(session=session, user_query="Plot the monthly amount instead.")
    _post(third, "Plot the monthly amount instead.", "User", "Planner")
    rounds.shared_memory_entry_create(
        session=session, type="plan", content="plot amount by month", scope="round", round_=third, created_by="Planner"
    )

    developer = agent_memory_yaml.load(main_document())
    developer["discoveries"].insert(0, dict(OLD_DISCOVERY))
    developer["context"]["blockers"] = [BLOCKER]
    memory = agent_memory.agent_memory_replace(session=session, agent="developer", document=developer)
    agent_memory.agent_memory_entry_append(session=session, agent="developer", kind="attempt", entry=FAILED_ATTEMPT)
    agent_memory.agent_memory_archive(memory_id=memory.pk, policy=ARCHIVE_POLICY)
    reviewer = agent_memory_yaml.load(examples_document("reviewer"))
    agent_memory.agent_memory_replace(session=session, agent="reviewer", document=reviewer)
    return session
