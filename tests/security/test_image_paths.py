"""Image references that name files are refused with 400, and the server never opens them.

The check is real: Python's "open" audit event (tests/security/open_spy.py) records every
file the process opens while the request runs, whichever API opens it.
"""

from __future__ import annotations

import pytest

from memory_app.conversations.models import Message, Session
from tests.security.open_spy import files_opened

pytestmark = pytest.mark.django_db

HOSTILE_REFS = [
    "/etc/passwd",
    "file:///etc/passwd",
    "../../x",
    "..\\..\\x",
    "~/.ssh/id_rsa",
    "/etc/passwd\x00.png",
    "data:image/png;base64,\x00iVBORw0KGgo=",
    "http://example.com/\x00/etc/passwd",
    "file:/etc/passwd",
    "FILE:///etc/passwd",
    "data:image/png;base64,../../x",
]
PNG = (
    "data:image/png;base64,"
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


def _touched(opened: list[str]) -> list[str]:
    return [name for name in opened if "passwd" in name or "id_rsa" in name or (name.endswith("x") and ".." in name)]


def _bodies(ref: str) -> dict[str, tuple[str, dict]]:
    """(path suffix, body) of every API write that takes images, keyed by what it sends."""
    return {
        "images": ("messages/", {"role": "user", "content": "look", "images": [PNG, ref]}),
        "image_url part": (
            "messages/",
            {"role": "user", "content": [{"type": "image_url", "image_url": {"url": ref}}]},
        ),
        "batch": ("messages/", {"messages": [{"role": "user", "content": "ok"}, {"role": "user", "images": [ref]}]}),
        "import": ("import", {"messages": [{"role": "user", "content": "x", "images": [ref]}]}),
    }


@pytest.mark.parametrize("ref", HOSTILE_REFS, ids=repr)
def test_file_like_image_references_are_400_and_never_opened(api, session_id, ref):
    sessions_before = Session.objects.count()
    for label, (suffix, body) in _bodies(ref).items():
        path = "/api/v1/sessions/import/" if suffix == "import" else f"/api/v1/sessions/{session_id}/{suffix}"
        with files_opened() as opened:
            response = api.post(path, body, format="json")
        assert response.status_code == 400, (label, response.status_code, response.content)
        fields = response.json()["fields"]
        assert any("images" in key or "content" in key for key in fields), (label, fields)
        assert _touched(opened) == [], (label, opened)
    assert Message.objects.count() == 0 and Session.objects.count() == sessions_before


@pytest.mark.parametrize("ref", HOSTILE_REFS, ids=repr)
def test_an_edit_cannot_swap_an_image_for_a_path(api, session_id, ref):
    message = api.post(
        f"/api/v1/sessions/{session_id}/messages/", {"role": "user", "content": "x", "images": [PNG]}, format="json"
    ).json()
    with files_opened() as opened:
        response = api.patch(
            f"/api/v1/sessions/{session_id}/messages/{message['message_id']}/", {"images": [ref]}, format="json"
        )
    assert response.status_code == 400 and "images[0]" in response.json()["fields"]
    assert _touched(opened) == []
    assert Message.objects.get().images == [PNG]


def test_the_spy_sees_a_real_open(tmp_path):
    # The check above would pass vacuously if the hook saw nothing: prove it sees opens.
    target = tmp_path / "passwd"
    target.write_text("x")
    with files_opened() as opened:
        target.read_text()
    assert str(target) in opened
