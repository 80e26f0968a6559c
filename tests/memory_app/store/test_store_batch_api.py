"""The store batch API: LangGraph's operations on one session's facts, filtered, paged and listed
in the database, exact namespaces, refusals that name the operation and field, team scoping."""

from __future__ import annotations

from typing import Any

import pytest

from memory_app.conversations import services as conversations
from memory_app.facts.models import Fact
from memory_app.tenancy.models import ApiKey
from tests.conftest import Tenant, make_tenant

pytestmark = pytest.mark.django_db

URL = "/api/v1/store/batch/"


@pytest.fixture
def session_id(tenant: Tenant) -> str:
    return str(conversations.session_create(team=tenant.team, external_id="langgraph-store").pk)


def batch(tenant: Tenant, session_id: str, *ops: dict[str, Any], expect: int = 200) -> Any:
    response = tenant.client.post(URL, {"session": session_id, "ops": list(ops)}, format="json")
    assert response.status_code == expect, response.json()
    return response.json()


def put(namespace: list[str], key: str, value: dict[str, Any] | None) -> dict[str, Any]:
    return {"op": "put", "namespace": namespace, "key": key, "value": value}


def search(prefix: list[str], **options: Any) -> dict[str, Any]:
    return {"op": "search", "namespace_prefix": prefix, **options}


def test_operations_run_in_order_and_each_sees_the_writes_before_it(tenant: Tenant, session_id: str) -> None:
    results = batch(
        tenant,
        session_id,
        {"op": "get", "namespace": ["users"], "key": "ann"},
        put(["users"], "ann", {"age": 40}),
        {"op": "get", "namespace": ["users"], "key": "ann"},
        put(["users"], "ann", None),
        {"op": "get", "namespace": ["users"], "key": "ann"},
        {"op": "list_namespaces"},
    )["results"]

    assert results[0] is None and results[1] is None
    assert {key: results[2][key] for key in ("namespace", "key", "value")} == {
        "namespace": ["users"],
        "key": "ann",
        "value": {"age": 40},
    }
    assert results[3:] == [None, None, []]
    facts = Fact.objects.filter(store_namespace="users").order_by("created_at")
    assert [(fact.object, fact.invalidated_at is None) for fact in facts] == [('{"age":40}', False), ("null", True)]


def test_namespaces_are_exact_and_prefixes_keep_like_wildcards_literal(tenant: Tenant, session_id: str) -> None:
    batch(
        tenant,
        session_id,
        put(["Foo"], "k", {"v": 1}),
        put(["foo"], "k", {"v": 2}),
        put(["tenant", "a_%"], "k", {"v": 3}),
        put(["tenant", "ab"], "k", {"v": 4}),
        put(["tenant", "a_%", "child"], "k", {"v": 5}),
        put(["tenantx"], "k", {"v": 6}),
    )

    results = batch(
        tenant,
        session_id,
        search(["Foo"]),
        search(["tenant", "a_%"]),
        search(["tenant"]),
        {"op": "list_namespaces", "prefix": ["tenant", "*"], "max_depth": 2},
        {"op": "list_namespaces", "suffix": ["child"]},
    )["results"]

    assert [item["value"] for item in results[0]] == [{"v": 1}]
    assert [item["value"] for item in results[1]] == [{"v": 5}, {"v": 3}]
    assert [item["value"] for item in results[2]] == [{"v": 5}, {"v": 4}, {"v": 3}]
    assert results[3] == [["tenant", "a_%"], ["tenant", "ab"]]
    assert results[4] == [["tenant", "a_%", "child"]]


def test_filters_and_pages_are_done_in_the_database_in_a_fixed_number_of_queries(
    tenant: Tenant, session_id: str, django_assert_num_queries: Any
) -> None:
    batch(
        tenant,
        session_id,
        *[put(["docs", f"d{i % 3}"], f"k{i}", {"n": i, "meta": {"odd": i % 2 == 1}}) for i in range(60)],
    )
    ops = [
        search(["docs"], filter={"meta.odd": True, "n": {"$gte": 10, "$lt": 50}}, limit=5, offset=2),
        {"op": "list_namespaces", "prefix": ["docs"], "limit": 2, "offset": 1},
    ]

    # the session, then one query for the search and one for the listing (the key is cached)
    with django_assert_num_queries(3):
        results = batch(tenant, session_id, *ops)["results"]

    assert [item["value"]["n"] for item in results[0]] == [45, 43, 41, 39, 37]
    assert results[1] == [["docs", "d1"], ["docs", "d2"]]


@pytest.mark.parametrize(
    ("op", "field"),
    [
        ({"op": "fetch"}, "ops[1].op"),
        ({"op": "get", "namespace": [], "key": "k"}, "ops[1].namespace"),
        ({"op": "get", "namespace": ["a.b"], "key": "k"}, "ops[1].namespace"),
        ({"op": "get", "namespace": ["a", 3], "key": "k"}, "ops[1].namespace"),
        ({"op": "get", "namespace": ["*"], "key": "k"}, "ops[1].namespace"),
        ({"op": "get", "namespace": ["a"], "key": "  "}, "ops[1].key"),
        ({"op": "put", "namespace": ["a"], "key": "k"}, "ops[1].value"),
        ({"op": "put", "namespace": ["a"], "key": "k", "value": [1]}, "ops[1].value"),
        ({"op": "put", "namespace": ["a"], "key": "k", "value": {"t": "x" * 1000}}, "ops[1].value"),
        ({"op": "search", "namespace_prefix": ["a"], "filter": {"n": {"$regex": "x"}}}, "ops[1].filter"),
        ({"op": "search", "namespace_prefix": ["a"], "filter": {"n": {"$gt": "1"}}}, "ops[1].filter"),
        ({"op": "search", "namespace_prefix": ["a"], "limit": -1}, "ops[1].limit"),
        ({"op": "list_namespaces", "max_depth": 0}, "ops[1].max_depth"),
    ],
)
def test_a_bad_operation_is_refused_naming_it_and_nothing_runs(
    tenant: Tenant, session_id: str, op: dict[str, Any], field: str
) -> None:
    body = batch(tenant, session_id, put(["a"], "first", {"v": 1}), op, expect=400)

    assert body["error"] == "validation_error"
    assert list(body["fields"]) == [field]
    assert not Fact.objects.exists()


def test_another_teams_session_is_not_found_and_a_read_key_only_reads(tenant: Tenant, session_id: str) -> None:
    other = make_tenant("beta")
    reader = make_tenant("alpha", role=ApiKey.Role.READ)
    batch(tenant, session_id, put(["a"], "k", {"v": 1}))

    assert batch(other, session_id, {"op": "get", "namespace": ["a"], "key": "k"}, expect=404)["error"] == "not_found"
    assert batch(other, session_id, put(["a"], "k", {"v": 2}), expect=404)["error"] == "not_found"
    got = batch(reader, session_id, {"op": "get", "namespace": ["a"], "key": "k"})["results"][0]
    assert got["value"] == {"v": 1}
    assert batch(reader, session_id, put(["a"], "k", {"v": 3}), expect=403)["error"] == "permission_denied"
    assert list(Fact.objects.values_list("object", flat=True)) == ['{"v":1}']


def test_a_write_key_cannot_replace_a_curated_value_which_keeps_the_new_one_for_review(
    tenant: Tenant, session_id: str
) -> None:
    batch(tenant, session_id, put(["policies"], "refunds", {"days": 30}))
    Fact.objects.update(curated=True)

    results = batch(tenant, session_id, put(["policies"], "refunds", {"days": 90}), search(["policies"]))["results"]

    assert results[0] == {"kept": False, "reason": "curated"}
    assert [item["value"] for item in results[1]] == [{"days": 30}]
    review = Fact.objects.get(object='{"days":90}')
    assert review.invalidated_at is not None and review.invalidated_by.object == '{"days":30}'


def test_an_admin_edit_of_a_store_fact_is_what_the_store_reads(tenant: Tenant, session_id: str) -> None:
    admin = make_tenant("alpha", role=ApiKey.Role.ADMIN)
    batch(tenant, session_id, put(["policies"], "refunds", {"days": 30}))
    fact = Fact.objects.get()

    edited = admin.client.patch(f"/api/v1/facts/{fact.pk}/", {"object": '{"days": 45}'}, format="json")

    assert edited.status_code == 200
    got = batch(tenant, session_id, {"op": "get", "namespace": ["policies"], "key": "refunds"})["results"][0]
    assert got["value"] == {"days": 45}
    filtered = batch(tenant, session_id, search(["policies"], filter={"days": 45}))["results"][0]
    assert [item["key"] for item in filtered] == ["refunds"]
