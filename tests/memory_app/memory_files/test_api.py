"""The memory-file API: the memory tool's six commands, path rules, limits, history and revert."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from rest_framework.test import APIClient

from memory_app.memory_files.models import MemoryFile, MemoryFileVersion
from memory_app.search import services as search_index
from memory_app.search.models import SearchItem, SearchKind
from memory_app.tenancy import services as tenancy
from memory_app.tenancy.models import ApiKey
from tests.conftest import Tenant

pytestmark = pytest.mark.django_db
COMMAND = "/api/v1/memory-files/command/"
ROOT = Path(__file__).resolve().parents[3]


def run(api: APIClient, **body: Any) -> Any:
    return api.post(COMMAND, body, format="json")


def ok(api: APIClient, **body: Any) -> dict[str, Any]:
    response = run(api, **body)
    assert response.status_code == 200, response.content
    return response.json()


def rows() -> list[dict[str, Any]]:
    return list(MemoryFile.objects.order_by("pk").values()) + list(MemoryFileVersion.objects.order_by("pk").values())


def test_the_six_commands_answer_in_the_memory_tools_words(api):
    created = ok(api, command="create", path="/memories/notes/todo.md", file_text="buy milk\ncall bob\n")
    assert created == {
        "command": "create",
        "path": "/memories/notes/todo.md",
        "output": "File created successfully at: /memories/notes/todo.md",
        "version": 1,
    }
    listing = ok(api, command="view", path="/memories")["output"]
    assert listing == (
        "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items:\n"
        "4K\t/memories\n4K\t/memories/notes/\n18B\t/memories/notes/todo.md"
    )
    shown = ok(api, command="view", path="/memories/notes/todo.md")
    assert shown["output"] == (
        "Here's the content of /memories/notes/todo.md with line numbers:\n     1\tbuy milk\n     2\tcall bob\n     3\t"
    )
    assert ok(api, command="view", path="/memories/notes/todo.md", view_range=[2, 2])["output"].endswith(
        "     2\tcall bob"
    )
    replaced = ok(api, command="str_replace", path="/memories/notes/todo.md", old_str="call bob", new_str="call ann")
    assert replaced["output"].startswith("The memory file has been edited. Here is the snippet")
    assert "     2\tcall ann" in replaced["output"] and replaced["version"] == 2
    inserted = ok(api, command="insert", path="/memories/notes/todo.md", insert_line=0, insert_text="# Todo")
    assert inserted["output"] == "The file /memories/notes/todo.md has been edited."
    renamed = ok(api, command="rename", old_path="/memories/notes", new_path="/memories/done")
    assert renamed["output"] == "Successfully renamed /memories/notes to /memories/done"
    file = MemoryFile.objects.get()
    assert (file.path, file.content, file.version) == ("/memories/done/todo.md", "# Todo\nbuy milk\ncall ann\n", 4)
    deleted = ok(api, command="delete", path="/memories/done/todo.md")
    assert deleted["output"] == "Successfully deleted /memories/done/todo.md"
    missing = run(api, command="view", path="/memories/done/todo.md")
    assert missing.status_code == 404
    assert missing.json()["detail"] == "The path /memories/done/todo.md does not exist. Please provide a valid path."


def test_every_change_is_a_version_with_its_author_and_diff_and_revert_brings_one_back(tenant, api):
    ok(api, command="create", path="/memories/plan.md", file_text="step one\n")
    ok(api, command="str_replace", path="/memories/plan.md", old_str="one", new_str="two")
    ok(api, command="delete", path="/memories/plan.md")

    history = api.get("/api/v1/memory-files/versions/", {"path": "/memories/plan.md"}).json()
    assert history["deleted"] is True
    assert [(v["version"], v["action"]) for v in history["results"]] == [(3, "delete"), (2, "edit"), (1, "create")]
    assert {v["author"] for v in history["results"]} == {f"key:{tenant.api_key.prefix}"}
    assert "-step one\n+step two" in history["results"][1]["diff"]

    reverted = api.post("/api/v1/memory-files/revert/", {"path": "/memories/plan.md", "version": 1}, format="json")
    assert reverted.status_code == 200, reverted.content
    assert reverted.json()["version"] == 4
    assert ok(api, command="view", path="/memories/plan.md")["output"].endswith("     1\tstep one\n     2\t")
    listed = api.get("/api/v1/memory-files/", {"prefix": "/memories/"}).json()["results"]
    assert [(f["path"], f["agent"], f["version"], f["size"]) for f in listed] == [("/memories/plan.md", "", 4, 9)]


def test_agents_have_trees_of_their_own_beside_the_shared_one(api):
    ok(api, command="create", path="/memories/notes.md", file_text="shared", agent="coder")
    ok(api, command="create", path="/memories/notes.md", file_text="team")
    assert ok(api, command="view", path="/memories/notes.md", agent="coder")["output"].endswith("1\tshared")
    assert ok(api, command="view", path="/memories/notes.md")["output"].endswith("1\tteam")
    everyone = api.get("/api/v1/memory-files/").json()["results"]
    assert [(f["agent"], f["path"]) for f in everyone] == [("", "/memories/notes.md"), ("coder", "/memories/notes.md")]
    assert len(api.get("/api/v1/memory-files/", {"agent": ""}).json()["results"]) == 1


REFUSED_PATHS = {
    "/memories/../etc/passwd": "'..'",
    "/memories/a/../../b": "'..'",
    "/etc/passwd": "must start with /memories/",
    "/memoriesx/a": "must start with /memories/",
    "/memories//a": "'//'",
    "/memories/.secret": "hidden name",
    "/memories/a\\b": "backslash",
    "/memories/a\x07b": "control or invisible character",
    "/memories/a\u202eb": "control or invisible character",
    "/memories/" + "n" * 101: "longer than 100 characters",
    "/memories/" + "/".join("d" * 9): "levels deep",
    "/memories/ padded": "starts or ends with a space",
    "/memories/a:b": "may not contain ':'",
}


@pytest.mark.parametrize("path", list(REFUSED_PATHS), ids=list(range(len(REFUSED_PATHS))))
def test_a_path_the_rules_refuse_is_a_400_naming_the_field_and_changes_nothing(api, path):
    response = run(api, command="create", path=path, file_text="x")
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["error"] == "validation_error"
    assert REFUSED_PATHS[path] in body["fields"]["path"][0]
    assert rows() == []


def test_a_nul_in_a_path_is_refused(api):
    response = run(api, command="create", path="/memories/a\x00b", file_text="x")
    assert response.status_code == 400 and "path" in response.json()["fields"]


def test_rename_refusals_name_old_path_or_new_path(api):
    ok(api, command="create", path="/memories/a.md", file_text="a")
    ok(api, command="create", path="/memories/b.md", file_text="b")
    before = rows()
    bad = run(api, command="rename", old_path="/memories/a.md", new_path="/memories/../a.md")
    assert bad.status_code == 400 and "new_path" in bad.json()["fields"]
    taken = run(api, command="rename", old_path="/memories/a.md", new_path="/memories/b.md")
    assert taken.status_code == 409
    assert taken.json()["detail"] == "The destination /memories/b.md already exists"
    gone = run(api, command="rename", old_path="/memories/zzz.md", new_path="/memories/c.md")
    assert gone.status_code == 404
    assert rows() == before


def test_str_replace_and_insert_refusals_say_why_and_change_nothing(api):
    ok(api, command="create", path="/memories/a.md", file_text="x\nx\n")
    before = rows()
    absent = run(api, command="str_replace", path="/memories/a.md", old_str="y", new_str="z")
    assert absent.status_code == 400
    assert absent.json()["detail"] == (
        "No replacement was performed, old_str `y` did not appear verbatim in /memories/a.md."
    )
    twice = run(api, command="str_replace", path="/memories/a.md", old_str="x", new_str="z")
    assert twice.status_code == 400
    assert "Multiple occurrences of old_str `x` in lines: 1, 2" in twice.json()["detail"]
    beyond = run(api, command="insert", path="/memories/a.md", insert_line=9, insert_text="z")
    assert beyond.status_code == 400 and beyond.json()["fields"] == {"insert_line": ["must be within [0, 2]"]}
    again = run(api, command="create", path="/memories/a.md", file_text="new")
    assert again.status_code == 409 and again.json()["detail"] == "File /memories/a.md already exists"
    root = run(api, command="delete", path="/memories")
    assert root.status_code == 400
    assert rows() == before


def test_size_and_count_limits_are_413_and_change_nothing(api, settings):
    settings.MEMORY_FILE_MAX_BYTES = 1024
    settings.MEMORY_FILE_MAX_FILES = 2
    too_big = run(api, command="create", path="/memories/big.md", file_text="é" * 600)
    assert too_big.status_code == 413
    assert "at most 1024" in too_big.json()["detail"]
    ok(api, command="create", path="/memories/a.md", file_text="a" * 1000)
    grow = run(api, command="insert", path="/memories/a.md", insert_line=0, insert_text="b" * 100)
    assert grow.status_code == 413
    ok(api, command="create", path="/memories/b.md", file_text="b")
    third = run(api, command="create", path="/memories/c.md", file_text="c")
    assert third.status_code == 413
    assert MemoryFile.objects.count() == 2 and MemoryFileVersion.objects.count() == 2


def test_a_read_key_views_but_cannot_change_a_memory_file(tenant, api):
    ok(api, command="create", path="/memories/a.md", file_text="a")
    _, raw = tenancy.api_key_create(team=tenant.team, name="reader", role=ApiKey.Role.READ)
    reader = APIClient()
    reader.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert ok(reader, command="view", path="/memories/a.md")["output"].endswith("1\ta")
    before = rows()
    for body in (
        {"command": "create", "path": "/memories/b.md", "file_text": "b"},
        {"command": "str_replace", "path": "/memories/a.md", "old_str": "a", "new_str": "b"},
        {"command": "insert", "path": "/memories/a.md", "insert_line": 0, "insert_text": "b"},
        {"command": "delete", "path": "/memories/a.md"},
        {"command": "rename", "old_path": "/memories/a.md", "new_path": "/memories/b.md"},
    ):
        refused = run(reader, **body)
        assert refused.status_code == 403, body
        assert refused.json()["error"] == "permission_denied"
    revert = reader.post("/api/v1/memory-files/revert/", {"path": "/memories/a.md", "version": 1}, format="json")
    assert revert.status_code == 403
    assert rows() == before


def test_another_teams_paths_find_nothing(api, other_tenant: Tenant):
    ok(api, command="create", path="/memories/secret.md", file_text="the launch code")
    before = rows()
    other = other_tenant.client
    assert run(other, command="view", path="/memories/secret.md").status_code == 404
    assert "secret" not in run(other, command="view", path="/memories").json()["output"]
    assert run(other, command="str_replace", path="/memories/secret.md", old_str="a", new_str="b").status_code == 404
    assert run(other, command="delete", path="/memories/secret.md").status_code == 404
    assert other.get("/api/v1/memory-files/").json()["results"] == []
    assert other.get("/api/v1/memory-files/versions/", {"path": "/memories/secret.md"}).status_code == 404
    revert = other.post("/api/v1/memory-files/revert/", {"path": "/memories/secret.md", "version": 1}, format="json")
    assert revert.status_code == 404
    assert rows() == before


def test_the_agent_record_document_is_a_read_only_file(api):
    session_id = api.post("/api/v1/sessions/", {}, format="json").json()["id"]
    api.post(
        f"/api/v1/sessions/{session_id}/agents/coder/memory/discoveries/",
        {"type": "codebase_structure", "content": "the router lives in app/routes.py"},
        format="json",
    )
    path = f"/memories/agent-records/{session_id}/coder/agent-memory.yaml"
    shown = ok(api, command="view", path=path)["output"]
    assert shown.startswith(f"Here's the content of {path} with line numbers:\n")
    assert "schema: agent-memory" in shown and "the router lives in app/routes.py" in shown
    listing = ok(api, command="view", path=f"/memories/agent-records/{session_id}")["output"]
    assert f"/memories/agent-records/{session_id}/coder/agent-memory.yaml" in listing
    assert "4K\t/memories/agent-records/" in ok(api, command="view", path="/memories")["output"]
    refused = run(api, command="str_replace", path=path, old_str="router", new_str="x")
    assert refused.status_code == 400 and "read-only" in refused.json()["fields"]["path"][0]
    assert run(api, command="create", path="/memories/agent-records/x.md", file_text="x").status_code == 400


def test_files_are_searchable_and_leave_the_index_when_deleted(api):
    ok(api, command="create", path="/memories/deploy.md", file_text="Rotate the staging certificates first.")
    item = SearchItem.objects.get(kind=SearchKind.MEMORY_FILE)
    assert "staging certificates" in item.text
    ok(api, command="str_replace", path="/memories/deploy.md", old_str="staging", new_str="production")
    assert "production certificates" in SearchItem.objects.get(kind=SearchKind.MEMORY_FILE).text
    ok(api, command="delete", path="/memories/deploy.md")
    assert not SearchItem.objects.filter(kind=SearchKind.MEMORY_FILE).exists()


def test_bad_bodies_name_the_field(api):
    unknown = run(api, command="explode", path="/memories/a.md")
    assert unknown.status_code == 400 and "command" in unknown.json()["fields"]
    no_path = run(api, command="view")
    assert no_path.status_code == 400 and "path" in no_path.json()["fields"]
    no_text = run(api, command="create", path="/memories/a.md")
    assert no_text.status_code == 400 and "file_text" in no_text.json()["fields"]
    bad_range = run(api, command="view", path="/memories", view_range=[1])
    assert bad_range.status_code == 400 and "view_range" in bad_range.json()["fields"]
    bad_agent = run(api, command="view", path="/memories", agent="a/b")
    assert bad_agent.status_code == 400 and "agent" in bad_agent.json()["fields"]
    assert rows() == []


def test_the_curl_example_of_the_api_docs_answers_as_shown(api):
    section = (ROOT / "docs" / "api.md").read_text().split("## Memory files", 1)[1]
    body = json.loads(re.search(r"-d '(\{.*?\})'", section).group(1))
    shown = json.loads(re.search(r"^# (\{.*\})$", section, re.M).group(1))
    assert ok(api, **body) == shown


def test_the_search_api_finds_a_files_text_and_reindex_rebuilds_it(api, tenant, other_tenant):
    ok(api, command="create", path="/memories/runbooks/deploy.md", file_text="Rotate the staging certificates.")
    ok(api, command="rename", old_path="/memories/runbooks", new_path="/memories/ops")

    found = api.post("/api/v1/search/", {"query": "staging certificates", "kinds": ["memory_file"]}, format="json")
    assert found.status_code == 200, found.content
    hits = found.json()["results"]
    assert [hit["kind"] for hit in hits] == ["memory_file"]
    assert hits[0]["text"] == "Rotate the staging certificates."
    theirs = other_tenant.client.post("/api/v1/search/", {"query": "staging certificates"}, format="json")
    assert theirs.json()["results"] == []

    SearchItem.objects.filter(kind=SearchKind.MEMORY_FILE).delete()
    search_index.search_reindex(team_id=tenant.team.pk, kind=SearchKind.MEMORY_FILE)
    assert SearchItem.objects.get(kind=SearchKind.MEMORY_FILE).text == "Rotate the staging certificates."
