"""Hostile YAML to every endpoint that reads YAML: refused at once, as JSON, with no side effect.

Python tags (`!!python/object/apply:os.system`) are refused by the safe loader; a "billion
laughs" alias bomb is refused while it is composed (memsite/safe_yaml.py counts what aliases
expand to), before anything walks it; a 10 MB body is refused (413) before it is parsed.
"""

from __future__ import annotations

import io
from typing import Any

import pytest
from django.apps import apps
from django.test import override_settings

from tests.security.conftest import World

pytestmark = pytest.mark.django_db

SID = "{session_id}"
MEMORY = f"/api/v1/sessions/{SID}/agents/developer/memory/"
# (route, method, content type): every route whose parsers take YAML
YAML_ROUTES = [
    (MEMORY, "put", "application/yaml"),
    (MEMORY, "put", "application/x-yaml"),
    (MEMORY + "discoveries/", "post", "application/yaml"),
    (MEMORY + "attempts/", "post", "text/yaml"),
    (MEMORY + "attempts/attempt-001/", "patch", "application/yaml"),
    (MEMORY + "decisions/", "post", "application/yaml"),
    (MEMORY + "context/", "put", "application/yaml"),
    (MEMORY + "context/", "patch", "text/yaml"),
    ("/api/v1/sessions/conversation/import/", "post", "application/yaml"),
    ("/api/v1/sessions/conversation/import/", "post", "text/yaml"),
]


def python_tag(marker: str) -> bytes:
    return (
        'version: "1"\nschema: agent-memory\n'
        f'context: !!python/object/apply:os.system ["touch {marker}"]\n'
        f'rounds: !!python/object/apply:os.system ["touch {marker}"]\n'
    ).encode()


def alias_bomb() -> bytes:
    lines = ['version: "1"', "schema: agent-memory", 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for previous, name in zip("abcdefgh", "bcdefghi", strict=True):
        lines.append(f"{name}: &{name} [" + ",".join([f"*{previous}"] * 9) + "]")
    lines.append("context: {notes: *i}")
    lines.append("rounds: *i")
    return "\n".join(lines).encode()


def recursive_alias() -> bytes:
    return b'version: "1"\nschema: agent-memory\ncontext: &loop {self: *loop}\n'


def ten_megabytes() -> bytes:
    line = b"- description: " + b"x" * 1000 + b"\n"
    return b'version: "1"\nschema: agent-memory\ndiscoveries:\n' + line * (10 * 1024 * 1024 // len(line) + 1)


def rows() -> dict[str, int]:
    return {
        model._meta.label: model.objects.count()
        for app in ("memory_app", "experiences_app")
        for model in apps.get_app_config(app).get_models()
    }


def send(world: World, route: str, method: str, content_type: str, body: bytes) -> Any:
    path = route.replace(SID, world.ids["session_id"])
    return world.clients["write"].generic(method.upper(), path, body, content_type=content_type)


def assert_refused(response: Any, statuses: tuple[int, ...]) -> None:
    assert response.status_code in statuses, (response.status_code, response.content[:300])
    assert response["Content-Type"] == "application/json"
    assert response.json()["error"] in ("parse_error", "payload_too_large", "validation_error")


@pytest.mark.parametrize(("route", "method", "content_type"), YAML_ROUTES)
def test_python_tags_are_refused_and_nothing_runs(world: World, tmp_path, route, method, content_type):
    marker = tmp_path / "pwned"
    before = rows()
    response = send(world, route, method, content_type, python_tag(str(marker)))
    assert_refused(response, (400,))
    assert "python/object/apply" in response.json()["detail"]
    assert not marker.exists()
    assert rows() == before


@pytest.mark.parametrize("payload", [alias_bomb, recursive_alias], ids=lambda f: f.__name__)
@pytest.mark.parametrize(("route", "method", "content_type"), YAML_ROUTES)
def test_alias_bombs_are_refused_while_parsing(world: World, payload, route, method, content_type):
    before = rows()
    response = send(world, route, method, content_type, payload())
    assert_refused(response, (400,))
    assert "alias" in response.json()["detail"]
    assert rows() == before


@pytest.mark.parametrize(("route", "method", "content_type"), YAML_ROUTES)
def test_a_ten_megabyte_yaml_body_is_413_before_parsing(world: World, route, method, content_type):
    before = rows()
    response = send(world, route, method, content_type, ten_megabytes())
    assert_refused(response, (413,))
    assert rows() == before


@override_settings(MAX_YAML_BYTES=4096)
def test_the_yaml_cap_is_a_setting_and_json_keeps_the_general_cap(world: World):
    big = b'version: "1"\nschema: agent-memory\ncontext: {notes: "' + b"x" * 5000 + b'"}\n'
    assert send(world, MEMORY, "put", "application/yaml", big).status_code == 413
    document = {"version": "1", "schema": "agent-memory", "context": {"notes": "x" * 5000}}
    path = MEMORY.replace(SID, world.ids["session_id"])
    assert world.clients["write"].put(path, document, format="json").status_code == 200


def test_a_hand_written_anchor_still_works(world: World):
    body = b'version: "1"\nschema: agent-memory\ncontext: {blockers: &b [one, two], notes: *b}\n'
    response = send(world, MEMORY, "put", "application/yaml", body)
    assert response.status_code == 200, response.content


def _import_files(world: World, files: dict[str, bytes]) -> Any:
    uploads = []
    for name, data in files.items():
        upload = io.BytesIO(data)
        upload.name = name
        uploads.append(upload)
    return world.clients["write"].post("/api/v1/experiences/import/", {"files": uploads}, format="multipart")


def test_experience_files_with_python_tags_bombs_or_10_mb_are_rejected_and_nothing_imported(world: World, tmp_path):
    marker = tmp_path / "pwned"
    files = {
        "handcrafted_exp_tag.yaml": b"exp_id: tag\nwhen: w\nwhat: " + python_tag(str(marker)).splitlines()[2][9:],
        "handcrafted_exp_bomb.yaml": alias_bomb().replace(b'version: "1"\nschema: agent-memory\n', b"")
        + b"\nexp_id: bomb\nwhen: w\nwhat: w\n",
        "handcrafted_exp_loop.yaml": b"exp_id: loop\nwhen: w\nwhat: w\nwho: &w [*w]\n",
        "handcrafted_exp_big.yaml": b"exp_id: big\nwhen: w\nwhat: " + b"x" * (10 * 1024 * 1024) + b"\n",
    }
    before = rows()
    response = _import_files(world, files)
    # The import is a batch (one bad file never stops the others): each file is reported.
    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    report = response.json()
    assert report["created"] == report["updated"] == report["unchanged"] == []
    errors = {entry["file"]: entry["error"] for entry in report["rejected"]}
    assert set(errors) == set(files)
    assert "python/object/apply" in errors["handcrafted_exp_tag.yaml"]
    assert "alias" in errors["handcrafted_exp_bomb.yaml"] and "alias" in errors["handcrafted_exp_loop.yaml"]
    assert "bytes" in errors["handcrafted_exp_big.yaml"]
    assert not marker.exists()
    assert rows() == before
