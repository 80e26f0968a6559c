"""Bodies and paths a careless client or an adversary sends: never a 500, never a poisoned row.

A lone UTF-16 surrogate ("\\ud800" in JSON) is not a Unicode scalar value: UTF-8 cannot encode
it, so a row holding one broke every later read of its session. Integers past 64 bits, nesting
past the parser's recursion limit and NUL in a URL segment each reached the database or the
parser's stack before.
"""

from __future__ import annotations

import json

import pytest
from django.db import connection

from memory_app.conversations import services
from memory_app.conversations.models import Message, Session
from memory_app.tenancy.models import TeamMembership
from tests.conftest import make_tenant

pytestmark = pytest.mark.django_db

SURROGATE_MESSAGE = '{"role":"user","content":"a\\ud800b"}'


def _post_raw(api, path: str, body: str, content_type: str = "application/json"):
    return api.generic("POST", path, body.encode("ascii"), content_type=content_type)


def test_a_lone_surrogate_in_a_message_is_a_400_naming_the_field(api, session_id):
    response = _post_raw(api, f"/api/v1/sessions/{session_id}/messages/", SURROGATE_MESSAGE)
    assert response.status_code == 400, response.content
    assert response.json()["error"] == "validation_error"
    assert list(response.json()["fields"]) == ["content"]
    assert not Message.objects.exists()


def test_a_lone_surrogate_in_a_batch_names_the_message_and_writes_nothing(api, session_id):
    body = (
        '{"messages":[{"role":"user","content":"fine"},{"role":"user","content":[{"type":"text","text":"\\udfff"}]}]}'
    )
    response = _post_raw(api, f"/api/v1/sessions/{session_id}/messages/", body)
    assert response.status_code == 400, response.content
    assert list(response.json()["fields"]) == ["messages[1].content[0].text"]
    assert not Message.objects.exists()


def test_a_lone_surrogate_in_session_metadata_is_a_400_and_commits_nothing(api):
    response = _post_raw(api, "/api/v1/sessions/", '{"metadata":{"k":"\\udfff"}}')
    assert response.status_code == 400, response.content
    assert list(response.json()["fields"]) == ["metadata.k"]
    assert not Session.objects.exists()
    assert api.get("/api/v1/sessions/").status_code == 200


def test_a_lone_surrogate_in_a_key_is_refused_too(api):
    response = _post_raw(api, "/api/v1/sessions/", '{"metadata":{"\\ud800":1}}')
    assert response.status_code == 400, response.content
    assert list(response.json()["fields"]) == ["metadata"]


def test_a_surrogate_pair_is_one_character_and_welcome(api, session_id):
    response = _post_raw(api, f"/api/v1/sessions/{session_id}/messages/", '{"role":"user","content":"\\ud83d\\ude00"}')
    assert response.status_code == 201, response.content
    assert Message.objects.get().content == "\U0001f600"


def test_a_lone_surrogate_in_a_yaml_body_is_a_400(api, session_id):
    response = api.generic(
        "PUT",
        f"/api/v1/sessions/{session_id}/agents/dev/memory/",
        'version: "1"\nschema: agent-memory\ndiscoveries: []\nattempts: []\ndecisions: []\ncontext: {x: "a\\ud800b"}\n',
        content_type="application/yaml",
    )
    assert response.status_code == 400, response.content
    assert list(response.json()["fields"]) == ["context.x"]


def _poison(session: Session) -> None:
    """Store a lone surrogate the way a row written before the parser refused them holds it.

    Message payloads are PostgreSQL `json` (kept as written), which accepts the escape; `jsonb`
    columns refuse it, so session metadata can only have been poisoned on SQLite.
    """
    services.message_append(session=session, messages=[{"role": "user", "content": "placeholder"}])
    session_pk = session.pk.hex if connection.vendor == "sqlite" else str(session.pk)
    with connection.cursor() as cursor:
        cursor.execute("UPDATE memory_app_message SET content = %s WHERE session_id = %s", ['"a\\ud800b"', session_pk])
        if connection.vendor == "sqlite":
            cursor.execute(
                "UPDATE memory_app_session SET metadata = %s WHERE id = %s", ['{"k": "\\udfff"}', session_pk]
            )


def test_rows_already_holding_lone_surrogates_read_as_replacement_characters(api, tenant, client, django_user_model):
    session = services.session_create(team=tenant.team, system_prompt="s")
    _poison(session)
    sid = session.pk
    for path in (
        f"/api/v1/sessions/{sid}/context/",
        f"/api/v1/sessions/{sid}/messages/",
        f"/api/v1/sessions/{sid}/export/",
        f"/api/v1/sessions/{sid}/export/?format=rawko",
        f"/api/v1/sessions/{sid}/",
        "/api/v1/sessions/",
    ):
        response = api.get(path)
        assert response.status_code == 200, (path, response.content[:300])
    assert "a\ufffdb" in api.get(f"/api/v1/sessions/{sid}/messages/").json()["results"][0]["content"]
    user = django_user_model.objects.create_user("viewer", password="pw")
    TeamMembership.objects.create(team=tenant.team, user=user)
    client.force_login(user)
    page = client.get(f"/sessions/{sid}/")
    assert page.status_code == 200
    assert "a\ufffdb" in page.content.decode("utf-8")


HUGE = 10**20


@pytest.mark.parametrize("value", [HUGE, -HUGE, 1e20])
def test_an_integer_past_64_bits_in_memory_config_is_a_400(api, value):
    response = api.post(
        "/api/v1/sessions/",
        {"memory_type": "managed_conversation", "memory_config": {"threshold_tokens": value}},
        format="json",
    )
    assert response.status_code == 400, response.content
    assert "memory_config.threshold_tokens" in response.json()["fields"]
    assert not Session.objects.exists()


def test_an_integer_past_64_bits_in_an_agent_record_is_a_400(api, session_id):
    response = api.post(
        f"/api/v1/sessions/{session_id}/agents/dev/memory/attempts/",
        {"approach": "try", "planStep": HUGE},
        format="json",
    )
    assert response.status_code == 400, response.content
    assert "planStep" in response.json()["fields"]


def test_an_integer_past_its_32_bit_column_is_a_400_not_a_database_error(api, session_id):
    config = api.post(
        "/api/v1/sessions/",
        {"memory_type": "managed_conversation", "memory_config": {"threshold_tokens": 2**40}},
        format="json",
    )
    assert config.status_code == 400, config.content
    assert "memory_config.threshold_tokens" in config.json()["fields"]
    attempt = api.post(
        f"/api/v1/sessions/{session_id}/agents/dev/memory/attempts/",
        {"approach": "a", "planStep": 2**40},
        format="json",
    )
    assert attempt.status_code == 400, attempt.content
    assert "planStep" in attempt.json()["fields"]
    assert api.get(f"/api/v1/attempts/?plan_step={2**40}").status_code == 400


@pytest.mark.parametrize(
    "path",
    [
        "sessions/{sid}/messages/?after={n}",
        "sessions/{sid}/context/?max_tokens={n}",
        "sessions/{sid}/rounds/?after={n}",
        "events/?after={n}",
    ],
)
def test_an_integer_past_64_bits_in_a_query_is_a_400(api, session_id, path):
    response = api.get("/api/v1/" + path.format(sid=session_id, n=HUGE))
    assert response.status_code == 400, response.content
    assert response.json()["error"] == "validation_error"


def test_an_integer_past_64_bits_anywhere_in_a_body_is_a_400_naming_it(api):
    body = '{"metadata": {"n": [1, 100000000000000000000]}}'
    response = _post_raw(api, "/api/v1/sessions/", body)
    assert response.status_code == 400, response.content
    assert list(response.json()["fields"]) == ["metadata.n[1]"]


@pytest.mark.parametrize("depth", [200, 1000, 5000])
def test_deeply_nested_json_is_a_400_at_parse_time(api, session_id, depth):
    body = '{"role":"user","content":"x","meta":' + "[" * depth + "]" * depth + "}"
    response = _post_raw(api, f"/api/v1/sessions/{session_id}/messages/", body)
    assert response.status_code == 400, response.content
    assert response.json()["error"] in {"parse_error", "validation_error"}
    assert "nest" in json.dumps(response.json())
    assert not Message.objects.exists()


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e400"])
def test_it_refuses_numbers_json_cannot_carry_with_the_apis_error_shape(api, session_id, number):
    # Python's json reads NaN and Infinity (and 1e400 as infinity); no JSON parser or jsonb column does.
    for path, body in (
        (f"/api/v1/sessions/{session_id}/messages/", '{"role":"user","content":"x","structured_data":{"w":%s}}'),
        ("/api/v1/sessions/", '{"metadata":{"w":[1,%s]}}'),
    ):
        response = _post_raw(api, path, body % number)
        assert response.status_code == 400, (path, response.content)
        assert set(response.json()) == {"error", "detail", "fields"}
        assert response.json()["error"] == "parse_error"
    assert not Message.objects.exists()
    assert Session.objects.count() == 1  # the fixture's own


def test_nesting_a_real_payload_needs_is_accepted(api, session_id):
    nested: object = "leaf"
    for _ in range(30):
        nested = {"k": nested}
    response = api.post(
        f"/api/v1/sessions/{session_id}/messages/",
        {"role": "user", "content": "x", "structured_data": nested},
        format="json",
    )
    assert response.status_code == 201, response.content


@pytest.mark.parametrize("depth", [200, 5000])
def test_deeply_nested_yaml_is_a_400(api, session_id, depth):
    document = "context: " + "[" * depth + "]" * depth + "\n"
    response = api.generic(
        "PUT", f"/api/v1/sessions/{session_id}/agents/dev/memory/", document, content_type="application/yaml"
    )
    assert response.status_code == 400, response.content
    assert "nest" in json.dumps(response.json())


@pytest.mark.parametrize("segment", ["agents/a%00b/memory/", "rounds/a%00b/", "agents/dev/memory/attempts/a%00b/"])
def test_a_nul_in_a_url_segment_is_a_json_400_before_any_query(api, session_id, segment, django_assert_num_queries):
    with django_assert_num_queries(0):
        response = api.get(f"/api/v1/sessions/{session_id}/{segment}")
    assert response.status_code == 400, response.content
    assert response["Content-Type"] == "application/json"
    assert response.json()["error"] == "validation_error"


def test_a_nul_in_a_query_parameter_is_a_400(api):
    response = api.get("/api/v1/sessions/?search=a%00b")
    assert response.status_code == 400, response.content
    assert list(response.json()["fields"]) == ["search"]


def test_other_teams_are_unaffected_by_a_refused_body(api, session_id):
    other = make_tenant("gamma")
    _post_raw(api, f"/api/v1/sessions/{session_id}/messages/", SURROGATE_MESSAGE)
    assert other.client.get("/api/v1/sessions/").status_code == 200
