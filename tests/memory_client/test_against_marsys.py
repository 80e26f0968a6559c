"""Differential tests: the same operations on marsys 0.2.1 (the reference) and on our client.

marsys needs Python 3.12 and lives in its own venv (`make test` creates var/marsys-venv;
MARSYS_PYTHON overrides it). It runs in a subprocess driven by marsys_driver.py; our client
runs in-process against the live server. Where the two deliberately differ, the test says
exactly how, so the list of differences in memory_client/README.md is checked too.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from memory_client import Message
from memory_client.openai_format import to_llm_dict
from tests.memory_client.conftest import PNG_BYTES, PNG_DATA_URL
from tests.memory_client.ops import run_scenario
from tests.memory_client.scenarios import AGREE, CALL_1, DIFFER, op, without_prompt

REPO = Path(__file__).resolve().parents[2]
DRIVER = Path(__file__).with_name("marsys_driver.py")
MARSYS_VERSION = "0.2.1"


def marsys_python() -> str:
    configured = os.environ.get("MARSYS_PYTHON")
    python = Path(configured) if configured else REPO / "var" / "marsys-venv" / "bin" / "python"
    if not python.exists():
        pytest.fail(
            f"The reference library is missing: {python} does not exist. Run `make test` (it creates "
            f"var/marsys-venv with marsys=={MARSYS_VERSION} from python3.12), or point MARSYS_PYTHON at a "
            f"Python 3.12 with marsys=={MARSYS_VERSION} installed.",
            pytrace=False,
        )
    return str(python)


def ask_marsys(request: dict[str, Any]) -> dict[str, Any]:
    """The driver's whole answer to one request (see marsys_driver.py), its marsys version checked."""
    done = subprocess.run(
        [marsys_python(), str(DRIVER)],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if done.returncode != 0:
        pytest.fail(f"marsys driver failed ({done.returncode}):\n{done.stderr[-4000:]}", pytrace=False)
    answer: dict[str, Any] = json.loads(done.stdout)
    if answer["marsys_version"] != MARSYS_VERSION:
        pytest.fail(f"Expected marsys {MARSYS_VERSION}, found {answer['marsys_version']}", pytrace=False)
    return answer


def run_marsys(scenarios: dict[str, Any], tmp: Path) -> dict[str, list[dict[str, Any]]]:
    results: dict[str, list[dict[str, Any]]] = ask_marsys({"tmp": str(tmp), "scenarios": scenarios})["results"]
    return results


def scratch(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "pixel.png").write_bytes(PNG_BYTES)
    return directory


@pytest.fixture(scope="module")
def marsys_tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """marsys's scratch directory: the files its scenarios saved stay there to be read."""
    return scratch(tmp_path_factory.mktemp("marsys"))


@pytest.fixture(scope="module")
def marsys(marsys_tmp: Path) -> dict[str, list[dict[str, Any]]]:
    """Every scenario on marsys, in one subprocess (importing marsys takes seconds)."""
    return run_marsys({**AGREE, **DIFFER}, marsys_tmp)


@pytest.fixture
def ours(make_memory, tmp_path):
    def run(scenario: dict[str, Any]) -> list[dict[str, Any]]:
        return run_scenario(
            scenario, make_manager=make_memory, make_message=Message, tmp=str(scratch(tmp_path)), to_llm=to_llm_dict
        )

    return run


def test_an_unknown_memory_type_is_an_agent_configuration_error_in_both(marsys, ours):
    assert marsys["unknown_memory_type"] == ours(AGREE["unknown_memory_type"]) == [{"error": "AgentConfigurationError"}]


def test_a_saved_file_writes_null_content_where_marsys_does(marsys, marsys_tmp, ours, tmp_path):
    ours(AGREE["save_writes_null_content"])
    theirs = json.loads((marsys_tmp / "null_content.json").read_text())["messages"]
    mine = json.loads((tmp_path / "null_content.json").read_text())["messages"]

    def contents(messages: list[dict[str, Any]]) -> list[tuple[str, bool, Any]]:
        return [(m["role"], "content" in m, m.get("content")) for m in messages]

    assert contents(theirs) == [("user", True, "count files"), ("assistant", True, None), ("tool", True, "a.txt")]
    assert contents(mine) == contents(theirs)


def intended(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """marsys's results as it means them: its TypeErrors-that-should-be-MessageErrors count as MessageErrors."""
    return [{k: v for k, v in result.items() if k != "raw"} for result in results]


@pytest.mark.parametrize("name", sorted(AGREE))
def test_client_matches_marsys(name, marsys, ours):
    assert ours(AGREE[name]) == intended(marsys[name])


def differ(name: str, marsys: dict, ours) -> tuple[list, list]:
    return marsys[name], ours(DIFFER[name])


def test_update_keeps_tool_call_id_which_marsys_drops(marsys, ours):
    theirs, mine = differ("update_keeps_tool_call_id", marsys, ours)
    assert theirs[3] == {"value": {"role": "tool", "content": "b.txt", "name": "ls"}}
    assert mine[3] == {"value": {"role": "tool", "content": "b.txt", "tool_call_id": "call_1", "name": "ls"}}


def test_load_from_file_replaces_the_prompt_where_marsys_duplicates_it(marsys, ours):
    theirs, mine = differ("load_replaces_the_prompt", marsys, ours)
    prompt, hi = {"role": "system", "content": "You are helpful"}, {"role": "user", "content": "hi"}
    assert theirs[3] == {"value": [prompt, prompt, hi]}
    assert mine[3] == {"value": [prompt, hi]}


def test_load_from_file_keeps_tool_call_id_which_marsys_drops(marsys, ours):
    theirs, mine = differ("load_keeps_tool_call_id", marsys, ours)
    assert theirs[4]["value"][1] == {"role": "tool", "content": "a.txt"}
    assert mine[4]["value"][1] == {"role": "tool", "content": "a.txt", "tool_call_id": "call_1"}


def test_marsys_message_error_is_really_a_type_error(marsys, ours):
    theirs, mine = differ("message_error_is_a_type_error_in_marsys", marsys, ours)
    assert theirs == [{"error": "MessageError", "raw": "TypeError"}]
    assert mine == [{"error": "MessageError"}]


def test_url_images_are_passed_through_where_marsys_drops_them(marsys, ours):
    # marsys opens every image as a file path, so a URL is lost with a warning.
    theirs, mine = differ("url_images_are_passed_through", marsys, ours)
    text = {"type": "text", "text": "remote"}
    assert theirs[1] == {"value": [{"role": "user", "content": [text]}]}
    url = {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}
    assert mine[1] == {"value": [{"role": "user", "content": [text, url]}]}


def test_list_content_keeps_its_images_where_marsys_drops_them(marsys, ours):
    theirs, mine = differ("list_content_with_images", marsys, ours)
    text = {"type": "text", "text": "parts"}
    assert theirs[1] == {"value": [{"role": "user", "content": [text]}]}
    image = {"type": "image_url", "image_url": {"url": PNG_DATA_URL}}
    assert mine[1] == {"value": [{"role": "user", "content": [text, image]}]}


def test_tool_list_content_is_json_where_marsys_uses_python_repr(marsys, ours):
    theirs, mine = differ("tool_list_content", marsys, ours)
    assert theirs[2]["value"][1]["content"] == "[{'type': 'text', 'text': 'out'}]"
    content = mine[2]["value"][1]["content"]
    # Compact JSON; its key order is the database's (see test_dict_content_keeps_its_key_order).
    assert json.loads(content) == [{"type": "text", "text": "out"}]
    assert content.startswith('[{"') and " " not in content


def test_the_server_refuses_messages_marsys_accepts(marsys, ours):
    theirs, mine = differ("server_validates_messages", marsys, ours)
    assert [r.get("error") for r in theirs[:4]] == [None] * 4
    assert mine == [{"error": "MessageError"}] * 4 + [{"value": []}]


def test_the_same_message_added_twice_is_stored_once(marsys, ours):
    # A re-sent message_id is a retry to the server (idempotent append), not a new message.
    theirs, mine = differ("same_message_added_twice", marsys, ours)
    once = {"role": "user", "content": "once?"}
    assert theirs[2] == {"value": [once, once]}
    assert mine[2] == {"value": [once]}


def test_replace_memory_keeps_the_row_id_where_marsys_makes_a_new_one(marsys, ours):
    theirs, mine = differ("replace_keeps_the_row_id", marsys, ours)
    assert theirs[2] == {"value": None}
    assert mine[2] == {"value": {"role": "user", "content": "after"}}


def test_the_prompt_can_only_be_replaced_by_a_system_text(marsys, ours):
    theirs, mine = differ("prompt_is_replaced_only_by_a_system_text", marsys, ours)
    assert theirs[1] == {"value": [{"role": "user", "content": "not a prompt"}]}
    assert mine == [{"error": "MessageError"}, {"value": [{"role": "system", "content": "You are helpful"}]}]


def test_an_unreadable_image_fails_at_add_instead_of_vanishing(marsys, ours):
    theirs, mine = differ("unreadable_image_path", marsys, ours)
    assert theirs[1] == {"value": [{"role": "user", "content": [{"type": "text", "text": "x"}]}]}
    assert mine == [{"error": "MessageError"}, {"value": []}]


def test_message_ids_must_be_uuids(marsys, ours):
    theirs, mine = differ("non_uuid_message_id", marsys, ours)
    assert theirs[0] == {"value": "$0"}
    assert mine == [{"error": "MessageError"}, {"value": []}]


def test_managed_memory_keeps_the_description_as_the_system_prompt(marsys, ours):
    # marsys's managed memory drops `description` (its Agent rebuilds the system prompt and
    # puts it in place of the first system message); here it is the session's prompt.
    theirs, mine = differ("managed_keeps_the_description", marsys, ours)
    assert theirs[1] == {"value": [{"role": "user", "content": "hi"}]}
    assert mine[1] == {"value": [{"role": "system", "content": "You are helpful"}, {"role": "user", "content": "hi"}]}
    assert theirs[4] == {"value": []}  # both resets delete every message row
    assert mine[4] == {"value": [{"role": "system", "content": "You are helpful"}]}


def test_a_tool_result_given_as_json_text_answers_the_call_it_names_where_marsys_drops_the_id(marsys, ours):
    theirs, mine = differ("tool_call_id_from_json_content", marsys, ours)
    text = '{"tool_call_id": "call_123", "output": "Result data"}'
    assert theirs[2]["value"][1] == {"role": "tool", "content": text, "name": "calculator"}
    assert mine[:2] == theirs[:2] == [{"value": "$0"}, {"value": "$1"}]
    assert mine[2]["value"][1] == {"role": "tool", "content": text, "tool_call_id": "call_123", "name": "calculator"}


def test_marsys_loads_a_file_our_client_saved(make_memory, tmp_path, png_path):
    memory = make_memory(description="You are helpful")
    memory.add(role="user", content="hello", name="alice")
    memory.add(role="assistant", content={"answer": 42}, tool_calls=[CALL_1])
    memory.add(role="assistant", content="a", agent_calls=[{"agent_name": "B", "request": "go"}])
    shared = scratch(tmp_path / "shared")
    memory.save_to_file(str(shared / "ours.json"), additional_state={"step": 3})

    scenario = without_prompt(op("load_from_file", "{tmp}/ours.json"), op("retrieve_all"))
    theirs = run_marsys({"load": scenario}, shared)["load"]

    assert theirs == [{"value": {"step": 3}}, {"value": memory.retrieve_all()}]
