"""The project's token accounting: tokens.py's pure counters with the configured encoding.

Every count cached on a row (messages, system prompts, summaries) comes from here, so
all of them use the same encoding and image estimate.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.conf import settings

from memory_app.conversations import tokens


def message_tokens(message: Mapping[str, Any]) -> int:
    return tokens.count_message(
        dict(message), encoding=settings.TOKEN_ENCODING, image_tokens=settings.IMAGE_TOKEN_ESTIMATE
    )


def truncate(text: str, max_tokens: int) -> str:
    return tokens.truncate_text(text, max_tokens, encoding=settings.TOKEN_ENCODING)
