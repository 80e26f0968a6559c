"""Schemathesis over the whole OpenAPI schema served at /api/schema/ (issue 7, Security).

Two property-based runs walk every operation the schema describes, so routes added later are
covered without touching this file (a new kind of path parameter fails
`test_every_path_parameter_names_a_populated_object` until `populate()` makes one):

* Tenant isolation: team B (an admin key) calls every operation with team A's ids in every
  path parameter and in every id-valued query or body field. An operation aimed at A's objects
  must refuse (400/401/403/404/405/413); no answer may carry A's canary text or ids; and A's rows
  in every project model are identical after each request.
* Conformance: a team calls every operation on its own data (its real ids most of the time,
  generated ones otherwise) with valid and invalid input: no 5xx, and every status code, media
  type, header and body as the schema documents them.
* /mcp/: JSON-RPC, so not in the OpenAPI schema and out of schemathesis' reach. Hypothesis
  generates its messages here instead, each sent as is and with each hostile body family, with
  the team's key, no key and a wrong key (see "/mcp/" below).

Requests go in-process through the real WSGI application (`memsite.wsgi.application`), on
whatever database the run uses (SQLite or PostgreSQL). Each operation gets a fixed number of
examples from a fixed seed, so CI runs are bounded and reproducible; each example runs in a
savepoint that is rolled back, so every example meets the same data.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
import schemathesis
from django.apps import apps
from django.conf import settings as django_settings
from django.core.signals import request_finished, request_started
from django.db import close_old_connections, models, transaction
from django.test import Client, override_settings
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core import NOT_SET
from schemathesis.core.parameters import ParameterLocation
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    ensure_resource_availability,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
    use_after_free,
)

from memory_app.compaction import services as compaction
from memory_app.facts import extraction as fact_extraction
from memory_app.mcp.tools import TOOLS
from memory_app.tenancy.models import ApiKey, Team
from memsite.wsgi import application
from tests.conftest import Tenant, make_tenant
from tests.memory_app.mcp.rpc import ENVELOPE, VERSION

pytestmark = [pytest.mark.django_db, pytest.mark.slow]

SEED = 20260707
EXAMPLES_PER_OPERATION = 15
SCHEMA_PATH = "/api/schema/?format=json"
# What an operation aimed at another team's object may answer.
REFUSALS = {400, 401, 403, 404, 405, 413}
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")
# Query and body fields that name an object by id -> the path parameter naming the same kind.
ID_FIELDS = {"session": "session_id", "session_id": "session_id", "round": "round_id", "round_id": "round_id"}

# What every answer must satisfy, whoever asks.
CONFORMANCE_CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]


# Values schema-driven generation never draws (Hypothesis' text omits surrogates, and a schema's
# integers have no 64-bit bound) but a careless client or a relayed LLM output sends: each
# JSON body and query is also tried with its first string holding a lone UTF-16 surrogate, its
# first integer past 64 bits, or (bodies) its first value nested past any parser's stack.
LONE_SURROGATE_TEXT = "a\ud800b"
HUGE_INTEGER = 10**20
DEEP_NESTING = 5000


def _replace_first_leaf(value: Any, kind: type, replacement: Any) -> tuple[Any, bool]:
    """`value` with its first leaf of `kind` (depth first) replaced, and whether one was."""
    if isinstance(value, kind) and not isinstance(value, bool):
        return replacement, True
    if isinstance(value, dict):
        for key, item in value.items():
            new, done = _replace_first_leaf(item, kind, replacement)
            if done:
                return {**value, key: new}, True
    if isinstance(value, list):
        for index, item in enumerate(value):
            new, done = _replace_first_leaf(item, kind, replacement)
            if done:
                return [*value[:index], new, *value[index + 1 :]], True
    return value, False


def hostile_variants(value: Any) -> list[Any]:
    """`value`, and each hostile variant as JSON text (a lone surrogate as its `\\ud800` escape:
    it cannot be encoded otherwise, and JSON text is YAML too)."""
    variants = [value]
    for kind, replacement in ((str, LONE_SURROGATE_TEXT), (int, HUGE_INTEGER)):
        changed, done = _replace_first_leaf(value, kind, replacement)
        if done:
            variants.append(json.dumps(changed).encode())
    return variants


def _deeply_nested(body: dict[str, Any]) -> bytes:
    """The body as JSON text with its first value nested DEEP_NESTING levels (built as text: no
    encoder of ours could write it, and schemathesis sends bytes as they are)."""
    marker = "__nested_here__"
    first = next(iter(body))
    text = json.dumps({**body, first: marker}).replace(f'"{marker}"', "[" * DEEP_NESTING + "]" * DEEP_NESTING, 1)
    return text.encode()


def _config(*, mode: str, coverage: bool) -> schemathesis.Config:
    return schemathesis.Config.from_dict(
        {
            "seed": SEED,
            "generation": {
                "mode": mode,
                "max-examples": EXAMPLES_PER_OPERATION,
                "deterministic": True,
                # the bearer key is ours to send; generated Authorization headers would only test 401s
                "with-security-parameters": False,
                "database": "none",
            },
            # the coverage phase adds schema-boundary cases (each enum value, min/max lengths, each
            # wrong type) on top of the random ones
            "phases": {"coverage": {"enabled": coverage}},
            # Values harvested from the app's source and from earlier responses make generation depend
            # on state Hypothesis cannot replay (FlakyStrategyDefinition in stateful runs).
            "analysis": {"constants": {"enabled": False}},
        }
    )


@contextmanager
def in_test_transaction() -> Iterator[None]:
    """Keep the test's transaction across in-process WSGI requests, as Django's test client does
    (and undoes after each of its own requests): the request signals would otherwise close the
    connection that holds it."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


# The schema is public (like /healthz), so it is fetched from the running app at collection.
with in_test_transaction():
    isolation_schema = schemathesis.openapi.from_wsgi(
        SCHEMA_PATH, application, config=_config(mode="positive", coverage=False)
    )
    conformance_schema = schemathesis.openapi.from_wsgi(
        SCHEMA_PATH, application, config=_config(mode="all", coverage=True)
    )


@dataclass
class Populated:
    """A team with one object of every kind, every text field carrying `canary`."""

    tenant: Tenant
    canary: str
    ids: dict[str, str] = field(default_factory=dict)

    @property
    def team(self) -> Team:
        return self.tenant.team


def _ok(response: Any, *statuses: int) -> dict[str, Any]:
    assert response.status_code in statuses, (response.status_code, response.content[:500])
    return response.json()


def populate(tenant: Tenant, canary: str) -> Populated:
    """Every kind of team data, made through the API and the services the worker calls."""
    api = tenant.client
    session = _ok(
        api.post(
            "/api/v1/sessions/",
            {
                "system_prompt": f"{canary} prompt",
                "external_id": f"{canary}-ext",
                "metadata": {"c": canary},
                "memory_type": "managed_conversation",  # compacted below
            },
            format="json",
        ),
        201,
    )
    sid = session["id"]
    base = f"/api/v1/sessions/{sid}"
    appended = _ok(
        api.post(
            f"{base}/messages/",
            {
                "messages": [
                    {"role": "user", "content": f"My name is Ada {canary}. I live in Paris."},
                    {"role": "assistant", "content": f"Noted {canary}."},
                    {"role": "user", "content": f"I work at Acme {canary}."},
                    {"role": "assistant", "content": f"Great {canary}."},
                ]
            },
            format="json",
        ),
        201,
    )
    message_id = appended["messages"][0]["message_id"]
    # Made before the compaction, so that the compaction's event records a delivery to it.
    webhook = _ok(api.post("/api/v1/webhooks/", {"url": f"http://127.0.0.1:9/{canary}"}, format="json"), 201)
    run = _ok(api.post(f"{base}/compact/"), 202)
    compaction.compaction_execute(run_id=run["id"])
    extraction = _ok(api.post(f"{base}/extract-facts/", {}, format="json"), 202)
    fact_extraction.fact_extraction_execute(run_id=extraction["id"])
    fact = _ok(
        api.post(
            "/api/v1/facts/",
            {"role": "user", "subject": canary, "predicate": "likes", "object": f"{canary} tea", "session": sid},
            format="json",
        ),
        201,
    )
    agent = "developer"
    memory = f"{base}/agents/{agent}/memory"
    _ok(api.post(f"{memory}/discoveries/", {"type": "code_pattern", "content": canary}, format="json"), 201)
    attempt = _ok(api.post(f"{memory}/attempts/", {"planStep": 1, "description": canary}, format="json"), 201)
    _ok(
        api.post(
            f"{memory}/decisions/",
            {"type": "implementation", "description": canary, "reasoning": canary},
            format="json",
        ),
        201,
    )
    round_ = _ok(
        api.post(f"{base}/rounds/", {"user_query": f"{canary} query", "id": f"round-{canary}"}, format="json"), 201
    )
    _ok(
        api.post(
            f"{base}/rounds/{round_['id']}/posts/",
            {"message": f"{canary} post", "send_from": "User", "send_to": "Planner", "attachment_list": []},
            format="json",
        ),
        201,
    )
    _ok(
        api.post(f"{base}/shared-memory/", {"type": "plan", "content": canary, "scope": "round"}, format="json"),
        201,
    )
    _ok(api.post(f"{base}/scratch/", {"action": canary, "observation": canary}, format="json"), 201)
    _ok(
        api.post(
            "/api/v1/memory-files/command/",
            {"command": "create", "path": f"/memories/{canary}.md", "file_text": canary, "agent": agent},
            format="json",
        ),
        200,
    )
    exp_id = f"exp-{canary}"
    _ok(
        api.post(
            "/api/v1/experiences/",
            {"exp_id": exp_id, "who": ["planner"], "when": f"{canary} when", "what": f"{canary} what"},
            format="json",
        ),
        201,
    )
    _ok(api.patch(f"/api/v1/experiences/{exp_id}/", {"what": f"{canary} what 2"}, format="json"), 200)
    _ok(api.post(f"/api/v1/experiences/{exp_id}/approve/"), 200)
    selection = _ok(
        api.post("/api/v1/experiences/select/", {"role": "planner", "query": f"{canary} when"}, format="json"), 200
    )
    assert selection["log_id"], selection
    deliveries = _ok(api.get(f"/api/v1/webhooks/{webhook['id']}/deliveries/"), 200)
    served = _ok(api.get(f"{base}/context/"), 200)  # a context the agent was served: its replay holds the canary
    ids = {
        "context_id": served["context_id"],
        "webhook_id": webhook["id"],
        "delivery_id": deliveries["results"][0]["id"],
        "session_id": sid,
        "message_id": message_id,
        "run_id": run["id"],
        "fact_id": fact["id"],
        "extraction_id": extraction["id"],
        "exp_id": exp_id,
        "selection_id": selection["log_id"],
        "agent": agent,
        "attempt_id": attempt["id"],
        "round_id": round_["id"],
    }
    return Populated(tenant=tenant, canary=canary, ids=ids)


@dataclass
class World:
    victim: Populated
    attacker: Tenant
    owner: Populated


@pytest.fixture(scope="module")
def world(django_db_setup, django_db_blocker) -> Iterator[World]:
    """The teams and their data, made once for the module in a transaction rolled back at its end
    (each test's own transaction nests inside it). LLM work uses the offline extractive backend."""
    with (
        django_db_blocker.unblock(),
        override_settings(
            # The event stream ends quickly (a generated request reads it to its end), and the LLM
            # rate limit never refuses the thousands of generated requests of one key.
            LLM_BASE_URL="",
            LLM_BACKEND="",
            SSE_MAX_SECONDS=0.2,
            LLM_RATE_LIMIT="1000000/minute",
        ),
        transaction.atomic(),
    ):
        yield World(
            victim=populate(make_tenant("victim", role=ApiKey.Role.ADMIN), canary=f"canary{uuid.uuid4().hex[:12]}"),
            # the strongest caller: an admin key, only of another team
            attacker=make_tenant("attacker", role=ApiKey.Role.ADMIN),
            owner=populate(make_tenant("owner", role=ApiKey.Role.ADMIN), canary=f"owner{uuid.uuid4().hex[:12]}"),
        )
        transaction.set_rollback(True)


def auth(tenant: Tenant) -> dict[str, str]:
    return {"Authorization": f"Bearer {tenant.key}"}


@contextmanager
def undone() -> Iterator[None]:
    """A savepoint rolled back at its end."""
    with transaction.atomic():
        yield
        transaction.set_rollback(True)


@contextmanager
def rolled_back() -> Iterator[None]:
    """One generated request in a savepoint undone afterwards: a DELETE in one example does not
    turn the later ones into 404s, and a broken one cannot spoil the next."""
    with in_test_transaction(), undone():
        yield


def project_models() -> list[type[models.Model]]:
    """Every model of the project's own apps (new apps included), not Django's or third parties'."""
    root = str(django_settings.BASE_DIR)
    return [
        model for config in apps.get_app_configs() if str(config.path).startswith(root) for model in config.get_models()
    ]


def team_lookup(model: type[models.Model], depth: int = 3) -> str | None:
    """The ORM path from `model` to its Team (`team`, `session__team`, `message__session__team` ...)."""
    if model is Team:
        return "pk"
    frontier: list[tuple[type[models.Model], str]] = [(model, "")]
    for _ in range(depth):
        following: list[tuple[type[models.Model], str]] = []
        for current, prefix in frontier:
            for field_ in current._meta.fields:
                if not field_.is_relation or field_.related_model is None:
                    continue
                path = f"{prefix}{field_.name}"
                if field_.related_model is Team:
                    return path
                following.append((field_.related_model, f"{path}__"))
        frontier = following
    return None


def team_rows(team: Team) -> dict[str, list[tuple[Any, ...]]]:
    """Every column of every row of every project model that belongs to `team`: the isolation oracle."""
    dump: dict[str, list[tuple[Any, ...]]] = {}
    for model in project_models():
        lookup = team_lookup(model)
        if lookup is not None:
            columns = [field_.attname for field_ in model._meta.concrete_fields]
            rows = model.objects.filter(**{lookup: team.pk}).order_by("pk").values_list(*columns)
            dump[model._meta.label] = list(rows)
    return dump


def _is_uuid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


def secrets_of(victim: Populated) -> list[str]:
    """What must never reach another team: the canary in every text, and every unguessable id."""
    return [victim.canary, *(value for value in victim.ids.values() if victim.canary in value or _is_uuid(value))]


def with_ids(values: Any, ids: dict[str, str]) -> Any:
    """`values` (a query or JSON body) with every id-valued field pointing at `ids`."""
    if not isinstance(values, dict):
        return values
    return {name: ids[ID_FIELDS[name]] if name in ID_FIELDS else value for name, value in values.items()}


def label(case: Any) -> str:
    return f"{case.method} {case.formatted_path}"


# --- tenant isolation -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def victim_rows(world: World) -> dict[str, list[tuple[Any, ...]]]:
    return team_rows(world.victim.team)


@isolation_schema.parametrize()
@settings(suppress_health_check=list(HealthCheck), deadline=None)
def test_another_teams_ids_reach_nothing_of_theirs(case, world, victim_rows):
    victim = world.victim
    case.path_parameters = {name: victim.ids.get(name, value) for name, value in (case.path_parameters or {}).items()}
    case.query = with_ids(case.query, victim.ids)
    case.body = with_ids(case.body, victim.ids)
    with rolled_back():
        response = case.call(headers=auth(world.attacker))
        case.validate_response(response, checks=CONFORMANCE_CHECKS)
        if case.operation.path_parameters:
            assert response.status_code in REFUSALS, (label(case), response.status_code, response.text[:500])
        for secret in secrets_of(victim):
            assert secret not in response.text, (label(case), response.status_code, secret)
        if case.method.upper() not in SAFE_METHODS:  # reads are not checked row by row: it would double the run
            assert team_rows(victim.team) == victim_rows, label(case)


def test_every_path_parameter_names_a_populated_object(world):
    names = {
        parameter.name for result in isolation_schema.get_all_operations() for parameter in result.ok().path_parameters
    }
    missing = sorted(names - set(world.victim.ids))
    assert not missing, f"populate() must make an object for each of {missing}"


# --- conformance ----------------------------------------------------------------------------


def aims_at_real_objects(case: Any) -> bool:
    """Schema-valid path parameters are swapped for the caller's own objects (where the answers
    worth checking are); invalid ones are kept. Unknown-but-valid ids meet their 404 in the
    isolation run, which applies the same checks."""
    path = case.meta.components.get(ParameterLocation.PATH) if case.meta else None
    return path is not None and path.mode == GenerationMode.POSITIVE


@conformance_schema.parametrize()
@settings(suppress_health_check=list(HealthCheck), deadline=None)
def test_every_operation_answers_as_documented_and_never_5xx(case, world):
    owner = world.owner
    if aims_at_real_objects(case):
        case.path_parameters = {name: owner.ids.get(name, value) for name, value in case.path_parameters.items()}
    with rolled_back():
        case.call_and_validate(headers=auth(owner.tenant), checks=CONFORMANCE_CHECKS)


@conformance_schema.hook
def flatmap_body(context: Any, body: Any) -> st.SearchStrategy[Any]:
    if body is NOT_SET or not isinstance(body, dict | list):
        return st.just(body)
    variants = hostile_variants(body)
    if isinstance(body, dict) and body:
        variants.append(_deeply_nested(body))
    return st.sampled_from(variants)


@conformance_schema.hook
def flatmap_query(context: Any, query: Any) -> st.SearchStrategy[Any]:
    if not isinstance(query, dict):
        return st.just(query)
    changed, done = _replace_first_leaf(query, int, HUGE_INTEGER)
    return st.sampled_from([query, changed]) if done else st.just(query)


def test_hostile_variants_reach_strings_integers_and_nesting():
    body = {"role": "user", "n": [1, {"k": "v"}]}
    assert hostile_variants(body) == [
        body,
        b'{"role": "a\\ud800b", "n": [1, {"k": "v"}]}',
        b'{"role": "user", "n": [100000000000000000000, {"k": "v"}]}',
    ]
    nested = _deeply_nested(body)
    assert nested.startswith(b'{"role": ' + b"[" * DEEP_NESTING) and nested.count(b"[") == DEEP_NESTING + 1


# --- /mcp/ ----------------------------------------------------------------------------------

# The families of the hostile bodies above, plus those only a hand-built body carries: NUL, the
# constants NaN and Infinity (Python's json reads them; JSON has none), and a body over the size cap.
MCP_BODY_FAMILIES = ("as sent", "lone surrogate", "NUL", "integer past 64 bits", "deep nesting", "NaN", "oversize")
MCP_CREDENTIALS = ("the team's key", "no key", "a wrong key")
MCP_METHODS = ("ping", "tools/list", "tools/call", "initialize", "server/discover", "resources/list")
MCP_EXAMPLES = 8
MCP_BODY_CAP = 64 * 1024  # the body-size cap for these runs: an oversized example stays small
_HOLE = "__hostile_value_here__"

json_leaves = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=16)
)
json_values = st.recursive(
    json_leaves,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)


@st.composite
def mcp_messages(draw: Any) -> tuple[dict[str, Any], dict[str, str]]:
    """A JSON-RPC request of either protocol era, and the headers its era asks for."""
    method = draw(st.sampled_from(MCP_METHODS))
    params: dict[str, Any] = draw(st.dictionaries(st.text(max_size=8), json_values, max_size=3))
    headers: dict[str, str] = {}
    if method == "tools/call":
        arguments = draw(st.dictionaries(st.text(max_size=12), json_values, max_size=4))
        params = {"name": draw(st.sampled_from(sorted(TOOLS))), "arguments": arguments}
    if draw(st.booleans()):  # the current era: the envelope, repeated in the headers
        params = {**params, "_meta": ENVELOPE}
        headers = {"MCP-Protocol-Version": VERSION, "Mcp-Method": method}
        if method == "tools/call":
            headers["Mcp-Name"] = params["name"]
    request_id = draw(st.integers(min_value=0, max_value=10**6) | st.text(min_size=1, max_size=8))
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}, headers


def mcp_body(message: dict[str, Any], family: str) -> bytes:
    """`message` as JSON text, with `family`'s hostile value under `params.probe` (built as text
    where no encoder would write it)."""
    if family == "as sent":
        return json.dumps(message).encode()
    value: Any = {
        "lone surrogate": LONE_SURROGATE_TEXT,
        "NUL": "a\x00b",
        "integer past 64 bits": HUGE_INTEGER,
        "oversize": "x" * MCP_BODY_CAP,
    }.get(family, _HOLE)
    text = json.dumps({**message, "params": {"probe": value, **message["params"]}})
    hole = {"deep nesting": "[" * DEEP_NESTING + "]" * DEEP_NESTING, "NaN": "NaN"}.get(family)
    return (text.replace(f'"{_HOLE}"', hole, 1) if hole else text).encode()


def _credentials(world: World, credentials: str) -> dict[str, str]:
    if credentials == "the team's key":
        return {"HTTP_AUTHORIZATION": f"Bearer {world.owner.tenant.key}"}
    if credentials == "a wrong key":
        return {"HTTP_AUTHORIZATION": "Bearer msk_guessed0000000000000000000000000000000"}
    return {}


def _strict_json(content: bytes) -> Any:
    def refuse(constant: str) -> Any:
        raise AssertionError(f"the answer holds {constant}, which is not JSON")

    return json.loads(content, parse_constant=refuse)


@pytest.mark.parametrize("credentials", MCP_CREDENTIALS)
@pytest.mark.parametrize("family", MCP_BODY_FAMILIES)
def test_mcp_answers_every_body_as_documented_and_never_5xx(world, family: str, credentials: str):
    refused_for_its_body = family != "as sent"

    @settings(
        max_examples=MCP_EXAMPLES,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(mcp_messages())
    def example(drawn: tuple[dict[str, Any], dict[str, str]]) -> None:
        message, headers = drawn
        body = mcp_body(message, family)
        client = Client(**_credentials(world, credentials))
        with undone(), override_settings(MAX_BODY_BYTES=MCP_BODY_CAP, DATA_UPLOAD_MAX_MEMORY_SIZE=MCP_BODY_CAP):
            rows_before = team_rows(world.owner.team) if refused_for_its_body else None
            response = client.post("/mcp/", body, content_type="application/json", headers=headers)
            where = (family, credentials, message["method"], response.status_code, response.content[:300])
            assert response.status_code < 500, where
            assert response["Content-Type"] == "application/json", where
            answer = _strict_json(response.content)
            if family == "oversize":
                # Refused from its Content-Length alone, before the key is looked at: nothing is read.
                assert response.status_code == 413 and answer["error"] == "payload_too_large", where
            elif credentials != "the team's key":
                assert response.status_code == 401, where
                assert answer["id"] is None and answer["error"]["code"] == -32001, where
            elif refused_for_its_body:
                assert response.status_code == 400, where
                assert answer["id"] is None and answer["error"]["code"] in (-32700, -32600), where
                assert answer["error"]["data"]["error"] in ("parse_error", "validation_error"), where
            else:
                assert response.status_code in (200, 400, 404), where
                assert answer["id"] in (message["id"], None), where
            if rows_before is not None:
                assert team_rows(world.owner.team) == rows_before, where

    example()


# --- stateful -------------------------------------------------------------------------------

# Links between operations are inferred by schemathesis from the schema (an id a response gives
# back feeds the next operation's path), so sequences such as create -> read -> patch -> delete
# -> read run without links declared by hand.
# Valid input only: invalid input is the stateless run's job, and an invalid (empty) id in a
# chain only collapses the URL into another route.
StatefulBase = isolation_schema.as_state_machine()
STATEFUL_CHECKS = [*CONFORMANCE_CHECKS, use_after_free, ensure_resource_availability]
# DELETE on these only marks the object (a fact is invalidated, never deleted: `as_of` still
# answers with it, README "Facts"), so reading it back afterwards is right.
SOFT_DELETED = {"/api/v1/facts/{fact_id}/"}
STATEFUL_RUNS = 25
STATEFUL_STEPS = 15


def test_chains_of_operations_answer_as_documented_and_never_5xx(world):
    owner = world.owner

    class Workflow(StatefulBase):  # type: ignore[misc, valid-type]
        # Each scenario runs in a savepoint undone at its end. Responses feed generation (a list's
        # length decides what is drawn next), so what one scenario created (sessions, events) must
        # not change the next one's answers: Hypothesis takes that for a flaky strategy.
        def setup(self) -> None:
            self.scenario = undone()
            self.scenario.__enter__()

        def teardown(self) -> None:
            transaction.set_rollback(True)
            self.scenario.__exit__(None, None, None)

        def before_call(self, case: Any) -> None:
            # A link may carry an empty id from a response ("round_id": "" of a selection made
            # outside any round) into a path: the URL would collapse into another route. Such a
            # step asks for an object that does not exist, so it is sent as one: a documented 404.
            case.path_parameters = {
                name: "absent" if value == "" else value for name, value in (case.path_parameters or {}).items()
            }

        def get_call_kwargs(self, case: Any) -> dict[str, Any]:
            return {"headers": auth(owner.tenant)}

        def validate_response(self, response: Any, case: Any, *args: Any, **kwargs: Any) -> None:
            checks = STATEFUL_CHECKS
            if case.operation.path in SOFT_DELETED:
                checks = [check for check in checks if check is not use_after_free]
            if case.body is not NOT_SET and case.body is not None:
                # This API answers 404 for an unknown id in a body too (a `round` of a shared-memory
                # entry, a fact's `session`), so a 404 there does not mean the created parent vanished.
                checks = [check for check in checks if check is not ensure_resource_availability]
            case.validate_response(response, checks=checks, recorder=self.recorder)

    run_settings = settings(
        max_examples=STATEFUL_RUNS,
        stateful_step_count=STATEFUL_STEPS,
        derandomize=True,
        deadline=None,
        database=None,
        # No shrinking: schemathesis feeds responses back into generation, which Hypothesis takes
        # for a flaky strategy when it replays a scenario; the unshrunk failure is reported instead.
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    with in_test_transaction():
        Workflow.run(settings=run_settings)
