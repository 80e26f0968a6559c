"""The conversation model's fixed words: round states, shared-memory scopes, attachment types.

A conversation holds rounds (a user query and the posts that answer it); a post carries typed
attachments; shared-memory entries are scoped to a round or the whole conversation. The server
validates against these same values, and the client's dataclasses use them.
"""

from __future__ import annotations

import secrets
from enum import Enum
from typing import Literal

RoundState = Literal["created", "finished", "failed"]
ROUND_STATES: tuple[str, ...] = ("created", "finished", "failed")
SCOPES: tuple[str, ...] = ("round", "conversation")


class AttachmentType(Enum):
    """Every attachment type a post may carry; anything else is a removed type."""

    # Planner
    plan = "plan"
    current_plan_step = "current_plan_step"
    plan_reasoning = "plan_reasoning"
    stop = "stop"

    # CodeInterpreter - code generation
    thought = "thought"
    reply_type = "reply_type"
    reply_content = "reply_content"
    verification = "verification"

    # CodeInterpreter - execution
    code_error = "code_error"
    execution_status = "execution_status"
    execution_result = "execution_result"
    artifact_paths = "artifact_paths"
    revise_message = "revise_message"

    # Function calling
    function = "function"

    # WebExplorer
    web_exploring_plan = "web_exploring_plan"
    web_exploring_screenshot = "web_exploring_screenshot"
    web_exploring_link = "web_exploring_link"

    # Shared state
    session_variables = "session_variables"
    shared_memory_entry = "shared_memory_entry"

    # Misc
    invalid_response = "invalid_response"
    text = "text"
    image_url = "image_url"


ATTACHMENT_TYPES: tuple[str, ...] = tuple(member.value for member in AttachmentType)


def new_id(prefix: str) -> str:
    """An id in the conversation file style: `round-`, `post-`, `atta-`, `sme-` + 12 hex digits."""
    return f"{prefix}-{secrets.token_hex(6)}"
