"""Addresses of dashboard pages that the pages of several domains link to: an agent's page and a
message's place in its session's timeline."""

from __future__ import annotations

from typing import Any

from django.urls import reverse
from django.utils.http import urlencode


def agent_url(name: str) -> str:
    """The agent's page, or "" when its name cannot be a path.

    Browsers and proxies resolve "." and ".." segments and merge "//" before the request reaches
    us, so a name with such a part (possible in a message's send_from) would open another page."""
    if any(part in ("", ".", "..") for part in name.split("/")):
        return ""
    return reverse("dashboard:agent", args=[name])


def message_url(session_id: Any, seq: int | None) -> str:
    """The session page at the message with this seq (the session page when there is no seq)."""
    url = reverse("dashboard:session", args=[session_id])
    # The session page lists messages after `after`: the one wanted comes first, and the anchor finds it.
    return f"{url}?{urlencode({'after': seq - 1})}#m{seq}" if seq else url
