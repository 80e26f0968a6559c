"""The LangGraph store on memsite's facts: a graph that remembers across invocations, and every op."""

from __future__ import annotations

import asyncio
from typing import Any, TypedDict

import httpx
import pytest
from langgraph.config import get_store
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import GetOp, ListNamespacesOp, MatchCondition, PutOp, SearchOp

from memory_app.facts.models import Fact
from memory_client.adapters.langgraph import MemsiteStore


@pytest.fixture
def store(memsite_env: dict[str, str]) -> Any:
    made: list[MemsiteStore] = []

    def make(session_id: str = "langgraph-store") -> MemsiteStore:
        made.append(MemsiteStore(session_id, **memsite_env))
        return made[-1]

    yield make
    for each in made:
        each.close()


class Chat(TypedDict, total=False):
    user_id: str
    text: str
    recalled: list[str]


def remember_and_recall() -> StateGraph:
    """A graph whose nodes use the store LangGraph hands them: a "remember:" message is kept, any
    other message recalls the user's memories most relevant to it."""

    def remember(state: Chat) -> Chat:
        if state["text"].startswith("remember: "):
            memory = state["text"].removeprefix("remember: ")
            get_store().put(("memories", state["user_id"]), f"memory-{len(memory)}", {"text": memory})
        return {}

    def recall(state: Chat) -> Chat:
        hits = get_store().search(("memories", state["user_id"]), query=state["text"], limit=3)
        return {"recalled": [hit.value["text"] for hit in hits]}

    builder = StateGraph(Chat)
    builder.add_node("remember", remember)
    builder.add_node("recall", recall)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "recall")
    builder.add_edge("recall", END)
    return builder


def test_a_graph_remembers_in_one_invocation_and_recalls_in_the_next(store, indexer):
    graph = remember_and_recall().compile(store=store())

    graph.invoke({"user_id": "alice", "text": "remember: Alice prefers pizza with olives"})
    graph.invoke({"user_id": "bob", "text": "remember: Bob prefers pizza with pineapple"})
    indexer()
    answer = graph.invoke({"user_id": "alice", "text": "which pizza does she prefer?"})

    assert answer["recalled"] == ["Alice prefers pizza with olives"]  # Bob's memory stays in his namespace


def test_put_and_get_and_a_new_value_supersedes_the_old_with_history_kept(store, client_tenant):
    memsite = store()

    results = memsite.batch(
        [
            PutOp(("users", "alice"), "prefs", {"theme": "dark", "font": {"size": 14}}),
            GetOp(("users", "alice"), "prefs"),
            PutOp(("users", "alice"), "prefs", {"theme": "light"}),
            GetOp(("users", "alice"), "prefs"),
            GetOp(("users", "alice"), "missing"),
        ]
    )

    assert results[0] is None
    assert results[1].value == {"theme": "dark", "font": {"size": 14}}
    assert (results[1].namespace, results[1].key) == (("users", "alice"), "prefs")
    assert results[3].value == {"theme": "light"}
    assert results[4] is None
    history = memsite.history(("users", "alice"), "prefs")
    assert [(fact["object"], fact["invalidated_at"] is None) for fact in history] == [
        ('{"theme":"light"}', True),
        ('{"theme":"dark","font":{"size":14}}', False),
    ]
    # They are ordinary facts of the team: memsite's own API shows them.
    live = client_tenant.client.get("/api/v1/facts/", {"subject": "users.alice"}).json()["results"]
    assert [(fact["predicate"], fact["object"]) for fact in live] == [("prefs", '{"theme":"light"}')]


def test_delete_supersedes_the_value_and_reads_no_longer_see_it(store):
    memsite = store()
    memsite.put(("users", "alice"), "prefs", {"theme": "dark"})
    memsite.put(("users", "alice"), "other", {"keep": True})

    memsite.delete(("users", "alice"), "prefs")
    memsite.delete(("users", "alice"), "never-set")

    assert memsite.get(("users", "alice"), "prefs") is None
    assert [item.key for item in memsite.search(("users",))] == ["other"]
    assert [fact["object"] for fact in memsite.history(("users", "alice"), "prefs")] == ["null", '{"theme":"dark"}']
    assert memsite.history(("users", "alice"), "never-set") == []
    memsite.put(("users", "alice"), "prefs", {"theme": "light"})
    assert memsite.get(("users", "alice"), "prefs").value == {"theme": "light"}


def test_search_without_a_query_filters_by_prefix_and_value_newest_first(store):
    memsite = store()
    for index in range(5):
        memsite.put(("docs", "reports" if index % 2 else "notes"), f"doc-{index}", {"n": index, "kind": "a"})
    memsite.put(("other",), "doc-x", {"n": 99, "kind": "a"})

    everything = memsite.search(("docs",))
    reports = memsite.search(("docs", "reports"))
    big = memsite.search(("docs",), filter={"n": {"$gte": 2}})
    page = memsite.search(("docs",), limit=2, offset=1)

    assert [item.key for item in everything] == ["doc-4", "doc-3", "doc-2", "doc-1", "doc-0"]
    assert [item.key for item in reports] == ["doc-3", "doc-1"]
    assert [item.key for item in big] == ["doc-4", "doc-3", "doc-2"]
    assert [item.key for item in page] == ["doc-3", "doc-2"]
    assert [item.key for item in memsite.search(("docs",), filter={"n": 1, "kind": "a"})] == ["doc-1"]
    assert all(item.score is None for item in everything)


def test_search_with_a_query_ranks_by_memsite_recall_within_the_namespace(store, indexer):
    memsite = store()
    memsite.put(("kb", "travel"), "oslo", {"text": "Oslo trains leave from the central station"})
    memsite.put(("kb", "travel"), "bergen", {"text": "Bergen is rainy, pack an umbrella"})
    memsite.put(("kb", "cooking"), "bread", {"text": "Bread needs a hot oven and steam"})
    memsite.put(("kb", "travel"), "old", {"text": "umbrella shops in Bergen close early"})
    memsite.delete(("kb", "travel"), "old")
    indexer()

    hits = memsite.search(("kb", "travel"), query="rainy Bergen umbrella")

    keys = [hit.key for hit in hits]
    assert keys[0] == "bergen"
    assert set(keys) <= {"bergen", "oslo"}  # not the deleted value, nothing from another namespace
    assert hits[0].score is not None  # ranked first; an item the search does not rank follows with None
    assert [hit.key for hit in memsite.search(("kb",), query="hot oven steam", limit=1)] == ["bread"]


def test_list_namespaces_with_prefix_suffix_depth_and_paging(store):
    memsite = store()
    for namespace in [("a", "b", "c"), ("a", "b", "d"), ("a", "e"), ("x", "b", "c")]:
        memsite.put(namespace, "k", {"v": 1})

    assert memsite.list_namespaces() == [("a", "b", "c"), ("a", "b", "d"), ("a", "e"), ("x", "b", "c")]
    assert memsite.list_namespaces(prefix=("a",)) == [("a", "b", "c"), ("a", "b", "d"), ("a", "e")]
    assert memsite.list_namespaces(suffix=("c",)) == [("a", "b", "c"), ("x", "b", "c")]
    assert memsite.list_namespaces(prefix=("*", "b")) == [("a", "b", "c"), ("a", "b", "d"), ("x", "b", "c")]
    assert memsite.list_namespaces(max_depth=2) == [("a", "b"), ("a", "e"), ("x", "b")]
    assert memsite.list_namespaces(limit=2, offset=1) == [("a", "b", "d"), ("a", "e")]
    op = ListNamespacesOp(match_conditions=(MatchCondition("prefix", ("a",)), MatchCondition("suffix", ("d",))))
    assert memsite.batch([op]) == [[("a", "b", "d")]]


def test_the_async_batch_runs_the_same_operations(store):
    memsite = store()

    async def scenario() -> list[Any]:
        await memsite.aput(("users", "carol"), "prefs", {"theme": "dark"})
        return await memsite.abatch([GetOp(("users", "carol"), "prefs"), SearchOp(("users",))])

    got, found = asyncio.run(scenario())

    assert got.value == {"theme": "dark"}
    assert [item.key for item in found] == ["prefs"]


def test_an_empty_store_answers_without_creating_anything(store, client_tenant):
    memsite = store("never-used")

    assert memsite.get(("users",), "k") is None
    assert memsite.search(("users",), query="anything") == []
    assert memsite.list_namespaces() == []
    assert client_tenant.client.get("/api/v1/sessions/", {"external_id": "never-used"}).json()["count"] == 0


def test_a_value_too_large_for_a_fact_is_refused_naming_it_and_nothing_is_written(store):
    memsite = store()

    with pytest.raises(ValueError, match=r"ops\[0\]\.value"):
        memsite.put(("users",), "essay", {"text": "x" * 2000})

    assert not Fact.objects.filter(predicate="essay").exists()


def test_a_write_key_cannot_replace_a_value_an_admin_curated(store):
    memsite = store()
    memsite.put(("policies",), "refunds", {"days": 30})
    Fact.objects.filter(predicate="refunds").update(curated=True)

    with pytest.raises(PermissionError):
        memsite.put(("policies",), "refunds", {"days": 90})

    assert memsite.get(("policies",), "refunds").value == {"days": 30}


def test_a_fact_added_with_replaces_supersedes_the_live_values_of_its_subject_and_predicate(client_tenant):
    api = client_tenant.client
    first = {"role": "user", "subject": "alice", "predicate": "favourite colour", "object": "green"}
    assert api.post("/api/v1/facts/", first, "json").status_code == 201
    assert api.post("/api/v1/facts/", {**first, "object": "blue"}, "json").status_code == 201
    live = api.get("/api/v1/facts/", {"subject": "alice"}).json()["results"]
    assert sorted(fact["object"] for fact in live) == ["blue", "green"]  # not single-valued: both stay

    response = api.post("/api/v1/facts/", {**first, "object": "red", "replaces": True}, "json")

    assert response.status_code == 201
    live = api.get("/api/v1/facts/", {"subject": "alice"}).json()["results"]
    assert [fact["object"] for fact in live] == ["red"]
    everything = api.get("/api/v1/facts/", {"subject": "alice", "include_invalidated": "true"}).json()["results"]
    assert {fact["object"]: fact["invalidated_by"] for fact in everything} == {
        "red": None,
        "blue": response.json()["id"],
        "green": response.json()["id"],
    }
    refused = api.post("/api/v1/facts/", {**first, "replaces": "yes"}, "json")
    assert refused.status_code == 400
    assert "replaces" in refused.json()["fields"]


def test_namespaces_and_keys_that_differ_only_in_letter_case_stay_apart(store):
    memsite = store()
    memsite.put(("Foo",), "k", {"v": "upper"})
    memsite.put(("foo",), "k", {"v": "lower"})
    memsite.put(("foo",), "K", {"v": "upper key"})

    assert memsite.get(("Foo",), "k").value == {"v": "upper"}
    assert memsite.get(("foo",), "k").value == {"v": "lower"}
    assert memsite.get(("foo",), "K").value == {"v": "upper key"}
    assert [item.key for item in memsite.search(("Foo",))] == ["k"]
    assert memsite.list_namespaces() == [("Foo",), ("foo",)]
    assert [fact["object"] for fact in memsite.history(("Foo",), "k")] == ['{"v":"upper"}']


def test_filters_match_dotted_paths_nested_objects_and_operators(store):
    memsite = store()
    memsite.put(("users",), "ann", {"user": {"access-level": "admin", "age": 40}, "tags": ["a", "b"]})
    memsite.put(("users",), "bob", {"user": {"access-level": "guest", "age": 20}})
    memsite.put(("users",), "cid", {"name": "no user object"})

    def keys(value_filter: dict[str, Any]) -> list[str]:
        return sorted(item.key for item in memsite.search(("users",), filter=value_filter))

    assert keys({"user.access-level": "admin"}) == ["ann"]
    assert keys({"user": {"access-level": "guest"}}) == ["bob"]
    assert keys({"user.age": {"$gte": 20, "$lt": 40}}) == ["bob"]
    assert keys({"user.access-level": {"$ne": "admin"}}) == ["bob", "cid"]  # a missing key differs too
    assert keys({"user.access-level": None}) == ["cid"]
    assert keys({"tags": ["a", "b"]}) == ["ann"]
    with pytest.raises(ValueError, match=r"ops\[0\]\.filter"):
        memsite.search(("users",), filter={"user.age": {"$gt": "forty"}})


def test_concurrent_async_operations_go_to_the_server_in_one_request(memsite_env):
    sent: list[str] = []

    class Counting(httpx.HTTPTransport):
        def handle_request(self, request: httpx.Request) -> httpx.Response:
            sent.append(request.url.path)
            return super().handle_request(request)

    memsite = MemsiteStore(**memsite_env, transport=Counting())
    memsite.put(("docs",), "seed", {"n": 0})

    async def scenario() -> list[Any]:
        writes = [memsite.aput(("docs",), f"k{index}", {"n": index}) for index in range(50)]
        reads = [memsite.aget(("docs",), f"k{index}") for index in range(50)]
        return await asyncio.gather(*writes, *reads, memsite.asearch(("docs",), limit=100))

    sent.clear()
    results = asyncio.run(scenario())
    memsite.close()

    assert sent == ["/api/v1/store/batch/"]
    assert [item.value["n"] for item in results[50:100]] == list(range(50))
    assert len(results[100]) == 51
