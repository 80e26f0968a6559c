"""Request body parsers: DRF's, plus one rule every body shares.

PostgreSQL cannot store NUL (U+0000) in text or jsonb, so a NUL anywhere in a parsed body (a
metadata value, a content part, a key) would fail at INSERT time as a 500 on PostgreSQL only.
It is refused at parse time instead, as a 400 naming where it was, on every database alike.
DRF's CharField already refuses NUL in plain text fields; this covers free-form JSON.
"""

from __future__ import annotations

from typing import Any

from rest_framework import parsers

from memsite.errors import InvalidInput

NUL = "\x00"
NUL_PROBLEM = "NUL characters (U+0000) are not allowed"


def refuse_nul(data: Any, path: str = "") -> Any:
    """`data` unchanged, or InvalidInput naming the first place holding a NUL character."""
    if isinstance(data, str):
        if NUL in data:
            raise InvalidInput.for_field(path or "non_field_errors", NUL_PROBLEM)
    elif isinstance(data, dict):
        for key, value in data.items():
            child = f"{path}.{key}" if path else str(key)
            if isinstance(key, str) and NUL in key:
                raise InvalidInput.for_field(path or "non_field_errors", f"{NUL_PROBLEM} (in a key)")
            refuse_nul(value, child)
    elif isinstance(data, list):
        for index, item in enumerate(data):
            refuse_nul(item, f"{path}[{index}]")
    return data


class JSONParser(parsers.JSONParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        return refuse_nul(super().parse(stream, media_type, parser_context))
