"""Misuse raises MessageError (as marsys means to); server refusals map to typed ApiErrors."""

from __future__ import annotations

import uuid

import pytest
from rest_framework.test import APIClient

from memory_app.conversations.models import Message as MessageRow
from memory_app.tenancy import services as tenancy
from memory_app.tenancy.models import ApiKey
from memory_client import (
    ApiError,
    AuthenticationError,
    ConflictError,
    MemoryManager,
    Message,
    MessageError,
    NotFoundError,
)
from tests.conftest import make_tenant


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"content": "no role"},
        {"role": "user", "tool_calls": "not a list"},
        {"role": "user", "tool_calls": [{"id": "", "function": {"name": "x"}}]},
        {"role": "user", "tool_calls": [42]},
        {"role": "user", "agent_calls": [{"agent_name": ""}]},
        {"role": "user", "agent_calls": [{"agent_name": "B", "request": None}]},
        {"role": "user", "images": "pic.png"},
        {"role": "user", "images": [3]},
    ],
)
def test_add_raises_message_error_where_marsys_does(make_memory, kwargs):
    memory = make_memory()
    with pytest.raises(MessageError):
        memory.add(**kwargs)
    assert not MessageRow.objects.exists()


def test_update_of_an_unknown_message_raises_message_error(make_memory):
    memory = make_memory()
    with pytest.raises(MessageError, match="not found in memory"):
        memory.update(str(uuid.uuid4()), content="x")
    with pytest.raises(MessageError, match="not found in memory"):
        memory.update("msg-1", content="x")


def test_replace_memory_without_message_or_role_raises_message_error(make_memory):
    memory = make_memory(description="sys")
    memory.add(role="user", content="one")
    with pytest.raises(MessageError, match="Either a Message object or role"):
        memory.replace_memory(1, content="x")


def test_index_0_prompt_can_only_become_another_system_text(make_memory):
    memory = make_memory(description="sys")
    with pytest.raises(MessageError, match="system prompt"):
        memory.replace_memory(0, role="user", content="x")
    with pytest.raises(MessageError, match="system prompt"):
        memory.replace_memory(0, role="system", content={"not": "text"})
    assert memory.retrieve_all() == [{"role": "system", "content": "sys"}]


def test_what_the_server_refuses_is_a_message_error_with_its_fields(make_memory):
    memory = make_memory()
    with pytest.raises(MessageError) as refused:
        memory.add(role="wizard", content="x")
    assert refused.value.fields == {"role": ['"wizard" is not a valid choice.']}
    with pytest.raises(MessageError) as orphan:
        memory.add(role="tool", content="x", tool_call_id="call_missing")
    assert list(orphan.value.fields) == ["tool_call_id"]
    with pytest.raises(MessageError):
        memory.add(role="user", images=["file:///etc/passwd"])  # not a local path either: unreadable
    with pytest.raises(MessageError, match="Cannot read image"):
        memory.add(role="user", images=["/no/such/image.png"])


def test_a_non_uuid_message_id_is_refused_before_sending(make_memory):
    memory = make_memory()
    with pytest.raises(MessageError, match="must be a UUID"):
        memory.add(Message(role="user", content="x", message_id="msg-1"))


def test_content_that_is_not_json_is_a_message_error(make_memory):
    memory = make_memory()
    with pytest.raises(MessageError, match="JSON"):
        memory.add(role="user", content={"when": object()})
    with pytest.raises(MessageError, match="JSON"):
        memory.add(role="user", content={"x": float("nan")})


def test_another_teams_session_is_not_found(make_memory, server_url):
    memory = make_memory(description="private")
    intruder = make_tenant("client-beta")
    with pytest.raises(NotFoundError) as error:
        MemoryManager(base_url=server_url, api_key=intruder.key, session_id=memory.session_id)
    assert error.value.status_code == 404


def test_a_deleted_session_is_not_found_rather_than_an_empty_memory(make_memory, client_tenant):
    memory = make_memory()
    message_id = memory.add(role="user", content="x")
    _, admin_key = tenancy.api_key_create(team=client_tenant.team, role=ApiKey.Role.ADMIN)  # purges need admin
    admin = APIClient()
    admin.credentials(HTTP_AUTHORIZATION=f"Bearer {admin_key}")
    assert admin.delete(f"/api/v1/sessions/{memory.session_id}/").status_code == 204
    with pytest.raises(NotFoundError):
        memory.retrieve_by_id(message_id)
    with pytest.raises(NotFoundError):
        memory.remove_by_id(message_id)
    with pytest.raises(NotFoundError):
        memory.update(message_id, content="y")
    with pytest.raises(NotFoundError):
        memory.retrieve_all()


def test_a_bad_key_is_an_authentication_error(server_url, transactional_db):
    with pytest.raises(AuthenticationError) as error:
        MemoryManager(base_url=server_url, api_key="msk_wrongwrongwrongwrongwrong")
    assert (error.value.status_code, error.value.error) == (401, "authentication_failed")


def test_a_read_only_key_can_read_but_not_write(make_memory, server_url):
    memory = make_memory(description="sys")
    reader = make_tenant("client-alpha", role=ApiKey.Role.READ)
    with MemoryManager(base_url=server_url, api_key=reader.key, session_id=memory.session_id) as read_only:
        assert read_only.retrieve_all() == [{"role": "system", "content": "sys"}]
        with pytest.raises(AuthenticationError) as error:
            read_only.add(role="user", content="x")
    assert error.value.status_code == 403


def test_a_taken_external_id_is_a_conflict(make_memory):
    make_memory(external_id="run-7")
    with pytest.raises(ConflictError):
        make_memory(external_id="run-7")


def test_a_message_id_used_in_another_session_is_a_conflict(make_memory):
    message = Message(role="user", content="x")
    make_memory().add(message)
    with pytest.raises(ConflictError):
        make_memory().add(message)


def test_missing_configuration_fails_loudly(monkeypatch):
    monkeypatch.delenv("MEMSITE_URL", raising=False)
    monkeypatch.delenv("MEMSITE_API_KEY", raising=False)
    with pytest.raises(ValueError, match="MEMSITE_URL"):
        MemoryManager()
    with pytest.raises(ValueError, match="MEMSITE_API_KEY"):
        MemoryManager(base_url="http://127.0.0.1:1")
    with pytest.raises(ValueError, match="memory_type"):
        MemoryManager("vector", base_url="http://127.0.0.1:1", api_key="k")
    with pytest.raises(ValueError, match="UUID"):
        MemoryManager(base_url="http://127.0.0.1:1", api_key="k", session_id="abc")


def test_an_unreachable_server_is_an_api_error_without_status():
    # Port 1 refuses connections: retried (never sent), then reported.
    with pytest.raises(ApiError) as error:
        MemoryManager(base_url="http://127.0.0.1:1", api_key="k", max_retries=1, timeout=2)
    assert (error.value.status_code, error.value.error) == (None, "unreachable")


def test_an_unknown_memory_type_is_marsys_agent_configuration_error_naming_the_field():
    from memory_client import AgentConfigurationError
    from memory_client.errors import AgentConfigurationError as same

    with pytest.raises(AgentConfigurationError) as refused:
        MemoryManager(memory_type="invalid_type", base_url="http://127.0.0.1:1", api_key="k")
    assert same is AgentConfigurationError
    assert isinstance(refused.value, ValueError)  # code written against the client's ValueError still catches it
    assert (refused.value.config_field, refused.value.config_value) == ("memory_type", "invalid_type")
    assert refused.value.error_code == "AGENT_CONFIGURATION_ERROR"
    assert "Unknown memory_type: invalid_type" in str(refused.value)
