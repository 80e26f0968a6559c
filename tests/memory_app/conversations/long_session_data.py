"""Sessions as the dashboard's users meet them: a 240-message coding session with tool calls,
long console output and images, a kg session with facts and extraction runs, a session whose
latest compaction failed. Built through the services (the API's write path)."""

from __future__ import annotations

import base64
import json
import struct
import zlib

from memory_app.compaction.models import CompactionRun
from memory_app.conversations import services
from memory_app.conversations.models import MemoryType, Session
from memory_app.facts import services as fact_services
from memory_app.facts.models import FactExtractionRun
from memory_app.tenancy.models import Team


def solid_png(width: int, height: int, rgb: tuple[int, int, int] = (220, 60, 40)) -> bytes:
    """A real PNG of one colour, so the data URL passes the API's magic-byte check."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    row = b"\x00" + bytes(rgb) * width
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(row * height))
        + chunk(b"IEND", b"")
    )


PNG = base64.b64encode(solid_png(64, 48)).decode()
PNG_DATA_URL = f"data:image/png;base64,{PNG}"

LONG_SESSION_MESSAGES = 240
TOOLS = ("read_file", "run_tests", "search_code")
LONG_OUTPUT_LINES = 80


def console_output(cycle: int) -> str:
    """What a test run prints: aligned columns, so whitespace matters."""
    lines = [
        f"tests/test_module_{n:03d}.py::test_case_{cycle}_{n}    PASSED    [{n:3d}%]" for n in range(LONG_OUTPUT_LINES)
    ]
    return "\n".join(["============ test session starts ============", *lines, f"==== {LONG_OUTPUT_LINES} passed ===="])


def assistant_answer(cycle: int) -> str:
    return (
        f"## Step {cycle}\n"
        f"The test run **passed**; next I will edit `module_{cycle}.py`.\n\n"
        "- keep the *public* API\n- add a test\n\n"
        "```python\ndef answer() -> int:\n    return 42\n```\n"
        "See [the docs](https://docs.python.org/3/)."
    )


def coding_session(team: Team, *, external_id: str = "refactor-240") -> Session:
    """240 messages in cycles of four: a user request (an image every 10th cycle), an assistant
    tool call, the tool's result (80 lines of console output every third cycle) and the answer."""
    session = services.session_create(
        team=team,
        external_id=external_id,
        system_prompt="You are a careful coding agent.",
        metadata={"agent_name": "coder"},
    )
    for cycle in range(LONG_SESSION_MESSAGES // 4):
        tool = TOOLS[cycle % len(TOOLS)]
        call_id = f"call_{cycle}"
        user: dict = {"role": "user", "content": f"Please do step {cycle}: *carefully*.", "send_from": "lead"}
        if cycle % 10 == 0:
            user["images"] = [PNG_DATA_URL]
        arguments = json.dumps({"path": f"src/module_{cycle}.py", "options": {"verbose": True, "lines": [1, 2]}})
        output = console_output(cycle) if cycle % 3 == 1 else f"ok: {tool} finished step {cycle}"
        services.message_append(
            session=session,
            messages=[
                user,
                {
                    "role": "assistant",
                    "content": None,
                    "name": "coder",
                    "tool_calls": [
                        {"id": call_id, "type": "function", "function": {"name": tool, "arguments": arguments}}
                    ],
                },
                {"role": "tool", "tool_call_id": call_id, "name": tool, "content": output},
                {"role": "assistant", "name": "coder", "content": assistant_answer(cycle)},
            ],
        )
    session.refresh_from_db()
    return session


def kg_session(team: Team, *, external_id: str = "kg-notes") -> Session:
    """A kg session with three facts (one from a message), a done and a failed extraction run."""
    session = services.session_create(team=team, external_id=external_id, memory_type=MemoryType.KG)
    services.message_append(
        session=session,
        messages=[
            {"role": "user", "content": "Ada works at Analytical Engines Ltd in London."},
            {"role": "assistant", "content": "Noted: Ada, Analytical Engines, London."},
        ],
    )
    for subject, predicate, obj in (
        ("Ada", "works at", "Analytical Engines Ltd"),
        ("Analytical Engines Ltd", "located in", "London"),
        ("Ada", "knows", "Charles"),
    ):
        fact_services.fact_add(
            team=team, role="user", subject=subject, predicate=predicate, object=obj, session=session
        )
    FactExtractionRun.objects.create(
        team=team, session=session, status="done", trigger="auto", from_seq=1, to_seq=2, facts_added=3
    )
    FactExtractionRun.objects.create(
        team=team, session=session, status="failed", trigger="manual", from_seq=1, to_seq=2, error="LLM timed out"
    )
    session.refresh_from_db()
    return session


def failed_compaction(session: Session) -> CompactionRun:
    """The session's latest compaction run, failed."""
    return CompactionRun.objects.create(
        team=session.team, session=session, status=CompactionRun.Status.FAILED, trigger="manual", error="LLM error"
    )
