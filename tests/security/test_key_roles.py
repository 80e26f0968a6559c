"""Key roles: read keys only read, write keys are agents, admin keys change team settings.

Agents (read and write keys) cannot change team settings or the LLM configuration (experience
config), approve or curate (experiences, facts, quarantined extractions) or purge (delete a
session or an experience). The table below gives the least role each route and method needs;
`test_every_api_route_and_method_is_classified` fails when a route is added without a row.
Each case runs against a team that has every object the route looks up, so a missing role
check cannot hide behind a 404: lower roles get 403 and change nothing, the least role succeeds.
"""

from __future__ import annotations

import io
from typing import Any

import pytest
from django.apps import apps
from rest_framework.response import Response

from memory_app.tenancy.models import ApiKey
from tests.security.conftest import World
from tests.url_routes import all_routes

pytestmark = pytest.mark.django_db

READ, WRITE, ADMIN = ApiKey.Role.READ.value, ApiKey.Role.WRITE.value, ApiKey.Role.ADMIN.value
ORDER = (READ, WRITE, ADMIN)
METHODS = ("get", "post", "put", "patch", "delete")

# (route name, method) -> the least role, and the body a caller with that role sends.
LEAST_ROLE: dict[tuple[str, str], str] = {}
BODIES: dict[tuple[str, str], Any] = {}


def role(name: str, method: str, least: str, body: Any = None) -> None:
    LEAST_ROLE[(name, method)] = least
    if body is not None:
        BODIES[(name, method)] = body


for _name in (
    "session-list", "session-detail", "message-list", "message-detail", "session-context", "session-export",
    "compaction-list", "event-list", "fact-list", "fact-detail", "fact-extraction-list",
    "fact-extraction-detail", "agent-memory", "agent-memory-prompt", "agent-memory-archive",
    "session-arbiter-summary", "attempt-list", "round-list", "round-detail", "shared-memory",
    "conversation-export", "session-scratch", "experience-list", "experience-export", "experience-config",
    "experience-detail", "experience-revisions", "experience-selection-list", "experience-selection-detail",
    "experience-selection-download", "usage", "event-stream", "webhook-list", "webhook-detail",
    "webhook-delivery-list", "agent-memory-attempt-detail", "agent-memory-context", "context-replay",
):  # fmt: skip
    role(_name, "get", READ)
role("experience-diff", "get", READ, {"a": 1, "b": 1})
role("fact-graph", "get", READ, {"entity": "sky"})
role("search", "post", READ, {"query": "sky"})  # a search only reads
# a store batch that only reads (its puts need a write key: tests/memory_app/store); its session is the world's
role(
    "store-batch", "post", READ, lambda world: {"session": world.ids["session_id"], "ops": [{"op": "list_namespaces"}]}
)
role("memory-file-list", "get", READ)
role("memory-file-versions", "get", READ, {"path": "/memories/notes.md"})

# agents: their own conversations, memory records, rounds and drafts
role("session-list", "post", WRITE, {"system_prompt": "x"})
role("session-import", "post", WRITE, {"messages": [{"role": "user", "content": "x"}]})
role("session-detail", "patch", WRITE, {"system_prompt": "y"})
role("message-list", "post", WRITE, {"role": "user", "content": "more"})
role("message-detail", "patch", WRITE, {"content": "edited"})
role("message-detail", "delete", WRITE)
role("session-reset", "post", WRITE)  # reset_memory: the agent's own working memory
role("session-compact", "post", WRITE)
role("compaction-revert", "post", WRITE)
role("session-extract-facts", "post", WRITE, {})
role("fact-list", "post", WRITE, {"role": "user", "subject": "grass", "predicate": "is", "object": "green"})
role("agent-memory", "put", WRITE, {"version": "1", "schema": "agent-memory", "discoveries": []})
role("agent-memory-discoveries", "post", WRITE, {"type": "codebase_structure", "content": "found it"})
role("agent-memory-attempts", "post", WRITE, {"planStep": 2, "description": "again"})
role("agent-memory-attempt-detail", "patch", WRITE, {"result": "success", "output": "done"})
role("agent-memory-context", "put", WRITE, {"currentPlanStep": 1})
role("agent-memory-context", "patch", WRITE, {"nextSteps": ["ship it"]})
role("agent-memory-context", "delete", WRITE)
role("agent-memory-decisions", "post", WRITE, {"type": "implementation", "description": "use X"})
role("conversation-import", "post", WRITE, {"rounds": []})
role("round-list", "post", WRITE, {"user_query": "next"})
role("round-detail", "patch", WRITE, {"state": "finished"})
role("round-posts", "post", WRITE, {"message": "m", "send_from": "Planner", "send_to": "User"})
role("shared-memory", "post", WRITE, {"type": "plan", "content": "c", "scope": "round"})
role("session-scratch", "post", WRITE, {"action": "ls"})
# a memory file changes with a write key (a read key may only `view` through the same route)
role(
    "memory-file-command",
    "post",
    WRITE,
    {"command": "insert", "path": "/memories/notes.md", "insert_line": 0, "insert_text": "x"},
)
role("memory-file-revert", "post", WRITE, {"path": "/memories/notes.md", "version": 1})
role("experience-list", "post", WRITE, {"exp_id": "new-one", "when": "w", "what": "w"})
role("experience-detail", "patch", WRITE, {"what": "changed"})
role("experience-import", "post", WRITE)
role("experience-select", "post", WRITE, {"role": "user", "query": "greeting"})
# admins: team settings (incl. the LLM alias), approval and curation, purges
role("session-detail", "delete", ADMIN)
role("experience-config", "put", ADMIN, {"use_experience": {"planner": False}, "llm_alias": "offline"})
role("experience-approve", "post", ADMIN, {})
role("experience-detail", "delete", ADMIN)
role("fact-detail", "patch", ADMIN, {"object": "grey"})
role("fact-detail", "delete", ADMIN)
role("fact-extraction-retry", "post", ADMIN)
role("fact-extraction-accept", "post", ADMIN, {"output": '{"facts": []}'})
role("fact-extraction-discard", "post", ADMIN)
role("webhook-list", "post", ADMIN, {"url": "http://127.0.0.1:9/other"})
role("webhook-detail", "patch", ADMIN, {"active": False})
role("webhook-detail", "delete", ADMIN)
role("webhook-redeliver", "post", ADMIN)

EXPERIENCE_FILE = b"exp_id: imported-one\nwho: []\nwhen: w\nwhat: w\n"


def api_methods() -> set[tuple[str, str]]:
    return {
        (route.name, method)
        for route in all_routes()
        if route.pattern.startswith("api/v1/")
        for method in METHODS
        if hasattr(route.view_class, method)
    }


def snapshot() -> dict[str, list[dict[str, Any]]]:
    """Every row of both apps' tables: a refused request must leave all of them as they were."""
    return {
        model._meta.label: list(model.objects.order_by("pk").values())
        for app in ("memory_app", "experiences_app")
        for model in apps.get_app_config(app).get_models()
    }


def send(world: World, role_name: str, name: str, method: str, body: Any = None) -> Response:
    path = next(route.path for route in all_routes(**world.ids) if route.name == name)
    client = world.clients[role_name]
    if callable(body):  # a body naming the world's objects
        body = body(world)
    if name == "experience-import":
        upload = io.BytesIO(EXPERIENCE_FILE)
        upload.name = "handcrafted_exp_imported-one.yaml"
        return client.post(path, {"files": [upload], **(body or {})}, format="multipart")
    if method == "get":
        return client.get(path, body or {})
    return getattr(client, method)(path, body, format="json")


def test_every_api_route_and_method_is_classified():
    assert api_methods() == set(LEAST_ROLE)


@pytest.mark.parametrize(("name", "method"), sorted(LEAST_ROLE), ids=lambda v: v)
def test_lower_roles_are_refused_and_the_least_role_succeeds(world: World, name: str, method: str):
    least = LEAST_ROLE[(name, method)]
    body = BODIES.get((name, method))
    for lower in ORDER[: ORDER.index(least)]:
        before = snapshot()
        refused = send(world, lower, name, method, body)
        assert refused.status_code == 403, (lower, refused.status_code, refused.content)
        assert refused.json()["error"] == "permission_denied"
        assert snapshot() == before
    allowed = send(world, least, name, method, body)
    assert 200 <= allowed.status_code < 300, (least, allowed.status_code, allowed.content[:500])


def test_a_write_key_cannot_set_an_experience_status_or_approve_on_import(world: World):
    before = snapshot()
    path = "/api/v1/experiences/some-experience/"
    assert world.clients[WRITE].patch(path, {"status": "approved"}, format="json").status_code == 403
    imported = send(world, WRITE, "experience-import", "post", {"approve": "true"})
    assert imported.status_code == 403
    assert snapshot() == before
    assert world.clients[ADMIN].patch(path, {"status": "approved"}, format="json").json()["status"] == "approved"
    assert send(world, ADMIN, "experience-import", "post", {"approve": "true"}).json()["created"] != []


def test_a_read_key_can_read_everything_a_write_key_can(world: World):
    for name, method in sorted(LEAST_ROLE):
        if method == "get":
            response = send(world, READ, name, method, BODIES.get((name, method)))
            assert response.status_code == 200, (name, response.status_code, response.content[:300])
