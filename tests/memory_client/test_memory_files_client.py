"""MemoryFiles against a live server over real HTTP: the commands, the history, revert, and the
errors a refused command raises."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from memory_client import MemoryFileError, MemoryFiles, NotFoundError


def test_a_managers_memory_files_run_the_commands_and_raise_the_servers_refusals(make_memory):
    files = make_memory().memory_files("coder")

    assert files.create("/memories/todo.md", "a\nb\n") == "File created successfully at: /memories/todo.md"
    assert files.insert("/memories/todo.md", 2, "c") == "The file /memories/todo.md has been edited."
    assert files.view("/memories/todo.md", view_range=[3, -1]).endswith("     3\tc\n     4\t")
    assert [(f["path"], f["agent"], f["version"]) for f in files.list_files()] == [("/memories/todo.md", "coder", 2)]
    assert [v["action"] for v in files.versions("/memories/todo.md")] == ["edit", "create"]
    assert files.revert("/memories/todo.md", 1)["version"] == 3

    with pytest.raises(MemoryFileError) as exists:
        files.create("/memories/todo.md", "again")
    assert (exists.value.status_code, exists.value.fields) == (409, {"path": ["already exists"]})
    with pytest.raises(MemoryFileError) as hidden:
        files.create("/memories/.env", "x")
    assert "hidden name" in hidden.value.fields["path"][0]
    with pytest.raises(NotFoundError):
        files.delete("/memories/nothing.md")
    shared = make_memory().memory_files()
    assert shared.list_files() == []
    with pytest.raises(NotFoundError):
        shared.view("/memories/todo.md")  # the coder's file is not in the shared tree


def test_concurrent_writers_lose_no_edit_and_one_create_wins(server_url, client_tenant):
    def create(_: int) -> str:
        with MemoryFiles(base_url=server_url, api_key=client_tenant.key) as files:
            try:
                return files.create("/memories/race.md", "first\n")
            except MemoryFileError as exc:
                return str(exc.status_code)

    def insert(n: int) -> str:
        with MemoryFiles(base_url=server_url, api_key=client_tenant.key) as files:
            return files.insert("/memories/race.md", 0, f"line {n}")

    with ThreadPoolExecutor(max_workers=6) as pool:
        created = list(pool.map(create, range(6)))
        inserted = list(pool.map(insert, range(6)))

    assert sorted(created) == ["409"] * 5 + ["File created successfully at: /memories/race.md"]
    assert set(inserted) == {"The file /memories/race.md has been edited."}
    with MemoryFiles(base_url=server_url, api_key=client_tenant.key) as files:
        text = files.view("/memories/race.md")
        assert all(f"\tline {n}" in text for n in range(6))
        assert [v["version"] for v in files.versions("/memories/race.md")] == list(range(7, 0, -1))
