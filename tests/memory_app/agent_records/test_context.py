"""The context section on its own: GET/PUT/PATCH/DELETE .../memory/context/, without the whole document."""

from __future__ import annotations

import json
import textwrap

import pytest

from memory_app.agent_records import documents as agent_memory_yaml
from memory_app.agent_records.models import AgentMemory
from memory_app.tenancy.models import ApiKey
from tests.conftest import make_tenant
from tests.memory_app.agent_records.documents import block, main_document

pytestmark = pytest.mark.django_db
YAML = "application/yaml"


def memory_url(session_id: str, tail: str = "", agent: str = "developer") -> str:
    return f"/api/v1/sessions/{session_id}/agents/{agent}/memory/{tail}"


def context_url(session_id: str, agent: str = "developer") -> str:
    return memory_url(session_id, "context/", agent)


@pytest.fixture
def memory(api, session_id) -> dict:
    response = api.put(memory_url(session_id), data=main_document().encode(), content_type=YAML)
    assert response.status_code == 200, response.content
    return response.json()


def context_block_body() -> str:
    """The conventions' context section as an agent would send it: the block under `context:`."""
    lines = block("5_context").splitlines(keepends=True)
    assert lines[0] == "context:\n"
    return textwrap.dedent("".join(lines[1:]))


# --- reading ------------------------------------------------------------------------------------


def test_the_context_section_is_read_on_its_own(api, session_id, memory):
    response = api.get(context_url(session_id))
    assert response.status_code == 200, response.content
    assert json.dumps(response.json()) == json.dumps(memory["context"])  # key order kept
    as_yaml = api.get(context_url(session_id), {"format": "yaml"})
    assert as_yaml["Content-Type"].startswith(YAML)
    assert agent_memory_yaml.load(as_yaml.content.decode()) == memory["context"]


def test_a_memory_without_context_reads_as_null(api, session_id):
    api.post(memory_url(session_id, "discoveries/"), {"type": "data_model", "content": "User"}, format="json")
    response = api.get(context_url(session_id))
    assert response.status_code == 200
    assert response.content == b"null" and response.json() is None
    assert agent_memory_yaml.load(api.get(context_url(session_id), {"format": "yaml"}).content.decode()) is None


def test_the_context_of_an_unknown_memory_is_404(api, session_id):
    assert api.get(context_url(session_id, agent="nobody")).status_code == 404
    assert api.delete(context_url(session_id, agent="nobody")).status_code == 404


# --- replacing ------------------------------------------------------------------------------------


def test_put_replaces_the_context_and_leaves_the_entries_alone(api, session_id, memory):
    new_context = {"currentPlanStep": 3, "planStepStatus": "pending", "blockers": ["Session store down"]}
    response = api.put(context_url(session_id), new_context, format="json")
    assert response.status_code == 200, response.content
    assert response.json() == new_context
    document = api.get(memory_url(session_id)).json()
    assert document == {**memory, "context": new_context}
    assert list(document) == list(memory)  # the section stays where the document had it


def test_put_takes_the_conventions_context_block_as_yaml(api, session_id):
    response = api.put(context_url(session_id), data=context_block_body().encode(), content_type=YAML)
    assert response.status_code == 200, response.content
    expected = agent_memory_yaml.load(block("5_context"))["context"]
    assert json.dumps(api.get(context_url(session_id)).json()) == json.dumps(expected)


def test_put_starts_the_memory_of_a_new_agent(api, session_id):
    response = api.put(context_url(session_id, agent="tester"), {"currentPlanStep": 1}, format="json")
    assert response.status_code == 200, response.content
    document = api.get(memory_url(session_id, agent="tester")).json()
    assert document["context"] == {"currentPlanStep": 1}
    assert (document["discoveries"], document["attempts"], document["decisions"]) == ([], [], [])


# --- patching -------------------------------------------------------------------------------------


def test_patch_replaces_only_the_keys_it_sends(api, session_id, memory):
    response = api.patch(
        context_url(session_id),
        {"currentPlanStep": 3, "blockers": ["Session store down"], "owner": "developer"},
        format="json",
    )
    assert response.status_code == 200, response.content
    expected = {**memory["context"], "currentPlanStep": 3, "blockers": ["Session store down"], "owner": "developer"}
    assert response.json() == expected
    assert list(response.json()) == [*memory["context"], "owner"]  # new keys go last
    document = api.get(memory_url(session_id)).json()
    assert document == {**memory, "context": expected}


def test_patch_sets_nullable_fields_to_null(api, session_id, memory):
    response = api.patch(context_url(session_id), {"currentPlanStep": None}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["currentPlanStep"] is None
    refused = api.patch(context_url(session_id), {"blockers": None}, format="json")
    assert refused.status_code == 400
    assert refused.json()["fields"] == {"blockers": ["must be a list, not null"]}


def test_patch_starts_a_context_where_there_was_none(api, session_id):
    api.post(memory_url(session_id, "discoveries/"), {"type": "data_model", "content": "User"}, format="json")
    response = api.patch(
        context_url(session_id), data=b"currentPlanStep: 1\nblockers:\n  - No database\n", content_type=YAML
    )
    assert response.status_code == 200, response.content
    assert api.get(memory_url(session_id)).json()["context"] == {"currentPlanStep": 1, "blockers": ["No database"]}


def test_the_prompt_follows_the_context(api, session_id, memory):
    api.patch(context_url(session_id), {"currentPlanStep": 3, "blockers": ["Session store down"]}, format="json")
    text = api.get(memory_url(session_id, "prompt/"), {"format": "text"}).content.decode()
    assert "- Step: 3\n- Blockers: Session store down\n" in text


# --- validation -------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["put", "patch"])
def test_the_context_is_validated_naming_each_field(api, session_id, memory, method):
    response = getattr(api, method)(
        context_url(session_id),
        {
            "currentPlanStep": "two",
            "blockers": [42],
            "filesInScope": [{"status": "pending"}],
            "taskContext": "JWT",
        },
        format="json",
    )
    assert response.status_code == 400
    body = response.json()
    assert body["error"] == "validation_error"
    assert set(body["fields"]) == {"currentPlanStep", "blockers[0]", "filesInScope[0].path", "taskContext"}
    assert body["fields"]["currentPlanStep"] == ["must be a whole number, not text"]
    assert api.get(context_url(session_id)).json() == memory["context"]  # nothing stored


@pytest.mark.parametrize("method", ["put", "patch"])
def test_the_context_must_be_a_mapping(api, session_id, memory, method):
    response = getattr(api, method)(context_url(session_id), ["blockers"], format="json")
    assert response.status_code == 400
    assert set(response.json()["fields"]) == {"non_field_errors"}


def test_an_agent_name_the_api_cannot_store_is_refused(api, session_id):
    response = api.put(context_url(session_id, agent="bad agent!"), {"currentPlanStep": 1}, format="json")
    assert response.status_code == 400
    assert set(response.json()["fields"]) == {"agent"}


# --- clearing -------------------------------------------------------------------------------------


def test_delete_clears_the_context_only(api, session_id, memory):
    response = api.delete(context_url(session_id))
    assert response.status_code == 204
    assert api.get(context_url(session_id)).json() is None
    document = api.get(memory_url(session_id)).json()
    assert document == {**memory, "context": None}
    text = api.get(memory_url(session_id, "prompt/"), {"format": "text"}).content.decode()
    assert "Current Task Context" not in text


# --- teams and keys -------------------------------------------------------------------------------


def test_another_team_cannot_read_or_write_the_context(api, session_id, memory, other_tenant):
    url = context_url(session_id)
    client = other_tenant.client
    assert client.get(url).status_code == 404
    assert client.put(url, {"currentPlanStep": 9}, format="json").status_code == 404
    assert client.patch(url, {"currentPlanStep": 9}, format="json").status_code == 404
    assert client.delete(url).status_code == 404
    assert api.get(url).json() == memory["context"]
    assert not AgentMemory.objects.filter(team=other_tenant.team).exists()


def test_a_read_key_reads_the_context_but_cannot_write_it(api, session_id, memory, tenant):
    reader = make_tenant(tenant.team.name, role=ApiKey.Role.READ).client
    url = context_url(session_id)
    assert reader.get(url).status_code == 200
    assert reader.put(url, {"currentPlanStep": 9}, format="json").status_code == 403
    assert reader.patch(url, {"currentPlanStep": 9}, format="json").status_code == 403
    assert reader.delete(url).status_code == 403
    assert api.get(url).json() == memory["context"]
