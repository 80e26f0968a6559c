"""TaskWeaver-style conversation dicts, built from its shapes (Conversation/Round/Post/Attachment.to_dict).

Between them they use every type of TaskWeaver's AttachmentType list, every round state,
shared memory entries of both scopes carried by attachments, and values YAML could misread
(multi-line text, "yes", "null", "1.0", unicode, nested extras).
"""

from __future__ import annotations

from typing import Any


def attachment(id_: str, type_: str, content: str, extra: Any = None) -> dict[str, Any]:
    return {"id": id_, "type": type_, "content": content, "extra": extra}


def post(id_: str, message: str, send_from: str, send_to: str, *attachments: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": id_,
        "message": message,
        "send_from": send_from,
        "send_to": send_to,
        "attachment_list": list(attachments),
    }


def round_(id_: str, user_query: str, state: str, *posts: dict[str, Any]) -> dict[str, Any]:
    return {"id": id_, "user_query": user_query, "state": state, "post_list": list(posts)}


def data_analysis_conversation() -> dict[str, Any]:
    """A Planner / CodeInterpreter / WebExplorer session of three rounds."""
    plan = "1. load data.csv\n2. count the rows\n3. report the count"
    return {
        "id": "conv-20240105-1a2b3c",
        "plugins": [{"name": "anomaly_detection", "enabled": True, "spec": {"args": ["df", "col"]}}],
        "enabled": True,
        "rounds": [
            round_(
                "round-20240105-000001",
                "How many rows are in data.csv?",
                "finished",
                post("post-000001", "How many rows are in data.csv?", "User", "Planner"),
                post(
                    "post-000002",
                    "Please load data.csv and count its rows.",
                    "Planner",
                    "CodeInterpreter",
                    attachment("atta-000001", "plan", plan),
                    attachment("atta-000002", "current_plan_step", "1. load data.csv"),
                    attachment("atta-000003", "plan_reasoning", "The user wants a count; the file must be read."),
                    attachment(
                        "atta-000004",
                        "shared_memory_entry",
                        "Add the plan to the shared memory",
                        {"type": "plan", "content": plan, "scope": "conversation", "id": "sme-000001"},
                    ),
                ),
                post(
                    "post-000003",
                    "The file has 1000 rows.",
                    "CodeInterpreter",
                    "Planner",
                    attachment("atta-000005", "thought", "I will read the file with pandas."),
                    attachment("atta-000006", "reply_type", "python"),
                    attachment(
                        "atta-000007", "reply_content", "import pandas as pd\ndf = pd.read_csv('data.csv')\nlen(df)"
                    ),
                    attachment("atta-000008", "verification", "CORRECT"),
                    attachment("atta-000009", "execution_status", "SUCCESS"),
                    attachment("atta-000010", "execution_result", "1000"),
                    attachment("atta-000011", "artifact_paths", "[]", ["/tmp/a.png"]),
                    attachment("atta-000012", "session_variables", "", {"df": "DataFrame", "n": 1000}),
                ),
                post(
                    "post-000004",
                    "data.csv has 1000 rows.",
                    "Planner",
                    "User",
                    attachment("atta-000013", "stop", "Completed"),
                ),
            ),
            round_(
                "round-20240105-000002",
                "Plot the rows per day",
                "failed",
                post("post-000005", "Plot the rows per day", "User", "Planner"),
                post(
                    "post-000006",
                    "Plot rows per day.",
                    "Planner",
                    "CodeInterpreter",
                    attachment(
                        "atta-000014",
                        "shared_memory_entry",
                        "Add the plan to the shared memory",
                        {"type": "plan", "content": "1. plot", "scope": "round", "id": "sme-000002"},
                    ),
                ),
                post(
                    "post-000007",
                    "The code failed.",
                    "CodeInterpreter",
                    "Planner",
                    attachment("atta-000015", "code_error", "ModuleNotFoundError: No module named 'matplotlib'"),
                    attachment("atta-000016", "revise_message", "install matplotlib first"),
                    attachment(
                        "atta-000017", "function", "plot_rows", {"name": "plot_rows", "arguments": {"by": "day"}}
                    ),
                    attachment("atta-000018", "invalid_response", "yes"),
                ),
            ),
            round_(
                "round-20240105-000003",
                "Find the dataset's source online ✓",
                "created",
                post("post-000008", "Find the dataset's source online ✓", "User", "Planner"),
                post(
                    "post-000009",
                    "Search the web.",
                    "Planner",
                    "WebExplorer",
                    attachment("atta-000019", "web_exploring_plan", "search 'data.csv rows per day'"),
                    attachment("atta-000020", "web_exploring_screenshot", "null", {"path": "shot.png"}),
                    attachment("atta-000021", "web_exploring_link", "https://example.org/data"),
                    attachment("atta-000022", "text", "1.0"),
                    attachment("atta-000023", "image_url", "data:image/png;base64,iVBORw0KGgo="),
                ),
            ),
        ],
    }


def minimal_conversation() -> dict[str, Any]:
    """The smallest conversation: one created round without posts, no plugins."""
    return {"id": "conv-min", "plugins": [], "enabled": False, "rounds": [round_("round-only", "", "created")]}
