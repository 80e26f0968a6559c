"""Two web nodes (two gunicorns, 2 sync workers each, as `make run` starts web) on the one test
database and broker: what one node does, the other sees. A revoked key is refused by every
worker process within API_KEY_CACHE_SECONDS, usage totals, idempotent replays and the event
stream agree across nodes.

Which worker answered a request is read from each node's own prometheus multiprocess directory
(the `memsite_http_requests_by_process` gauge, one series per worker pid), read from its files
rather than scraped, so checking it adds no request.
"""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.multiprocess import MultiProcessCollector

from memory_app.conversations.models import Message, Session
from memory_app.events.models import MemoryEvent
from memory_app.tenancy import services as tenancy
from tests.conftest import Tenant, make_tenant
from tests.memory_app.events.test_stream import Sse, parse
from tests.worker_process import process_env, start_gunicorn, stop, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

WORKERS = 2
# The documented bound: a revoked key is refused by every process at most this long after the
# revocation (MEMSITE_API_KEY_CACHE_SECONDS; short here so the test waits little).
CACHE_SECONDS = 2
# Scheduling and the request in flight when the bound passes (one request on a busy 2-core machine).
SLACK_SECONDS = 1.0
# The default interval at which each web process writes the context-ledger rows it holds.
LEDGER_FLUSH_SECONDS = 1.0
NODE_ENV = {
    "MEMSITE_API_KEY_CACHE_SECONDS": str(CACHE_SECONDS),
    "MEMSITE_CONTEXT_LEDGER_FLUSH_SECONDS": str(LEDGER_FLUSH_SECONDS),
    # A stream a client left frees its sync worker at the next heartbeat write, so the workers
    # are all free again for the next test; and every stream ends by itself soon.
    "MEMSITE_SSE_POLL_SECONDS": "0.05",
    "MEMSITE_SSE_HEARTBEAT_SECONDS": "0.3",
    "MEMSITE_SSE_MAX_SECONDS": "5",
    # Each test's events are deleted after it, so the next stream starts below a hole in the ids,
    # which the cursor holds for this long in case it is a transaction still committing.
    "MEMSITE_SSE_GAP_GRACE_SECONDS": "0.2",
}
REQUESTS_BY_PROCESS = "memsite_http_requests_by_process"


@dataclass
class Node:
    name: str
    process: subprocess.Popen[str]
    url: str
    metrics_dir: Path
    http: httpx.Client

    def get(self, path: str, key: str, **kwargs: Any) -> httpx.Response:
        return self.http.get(f"{self.url}{path}", headers={**bearer(key), **kwargs.pop("headers", {})}, **kwargs)

    def post(self, path: str, key: str, **kwargs: Any) -> httpx.Response:
        return self.http.post(f"{self.url}{path}", headers={**bearer(key), **kwargs.pop("headers", {})}, **kwargs)

    def workers(self) -> set[int]:
        text = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children").read_text()
        return {int(pid) for pid in text.split()}

    def requests_by_worker(self) -> dict[int, float]:
        registry = CollectorRegistry()
        MultiProcessCollector(registry, path=str(self.metrics_dir))
        return {
            int(sample.labels["pid"]): sample.value
            for family in registry.collect()
            if family.name == REQUESTS_BY_PROCESS
            for sample in family.samples
        }


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture(scope="module")
def nodes(
    django_db_setup: None, django_db_blocker: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[list[Node]]:
    """Nodes A and B, started together once for the module; each test brings its teams."""
    dirs = [tmp_path_factory.mktemp(f"prometheus-{name}") for name in "ab"]
    with django_db_blocker.unblock():
        envs = [process_env({**NODE_ENV, "PROMETHEUS_MULTIPROC_DIR": str(path)}) for path in dirs]
    with ThreadPoolExecutor(max_workers=2) as pool:
        starts = [pool.submit(start_gunicorn, env, WORKERS) for env in envs]
    started = [start.result()[0] for start in starts if start.exception() is None]
    # No keep-alive: every request is a new connection, a new accept that either worker may take.
    http = httpx.Client(timeout=30, limits=httpx.Limits(max_keepalive_connections=0))
    try:
        urls = [start.result()[1] for start in starts]  # raises the first start-up failure
        yield [Node(*node, http) for node in zip("AB", started, urls, dirs, strict=True)]
    finally:
        http.close()
        with ThreadPoolExecutor(max_workers=2) as pool:
            list(pool.map(stop, started))


def authenticated_status(node: Node, key: str) -> int:
    """The status of a cheap request that needs the key (the session list)."""
    return node.get("/api/v1/sessions/", key).status_code


def on_every_worker(node: Node, key: str, *, at_least: int = 30, at_most: int = 300) -> set[int]:
    """The statuses `node` answers `key` with, from requests sent 4 at a time (two sync workers
    cannot both stay idle) until at least `at_least` were sent and every worker answered one."""
    before = node.requests_by_worker()
    statuses: list[int] = []

    def everyone_answered() -> bool:
        after = node.requests_by_worker()
        return all(after.get(pid, 0) > before.get(pid, 0) for pid in node.workers())

    with ThreadPoolExecutor(max_workers=4) as pool:
        while len(statuses) < at_least or not everyone_answered():
            assert len(statuses) < at_most, f"node {node.name}: a worker answered none of {len(statuses)} requests"
            statuses += pool.map(authenticated_status, [node] * 8, [key] * 8)
    return set(statuses)


def everywhere(nodes: list[Node], key: str) -> dict[str, set[int]]:
    """Per node, the statuses its workers (every one of them) answer `key` with; nodes at once."""
    with ThreadPoolExecutor(max_workers=len(nodes)) as pool:
        answers = pool.map(on_every_worker, nodes, [key] * len(nodes))
        return dict(zip([node.name for node in nodes], answers, strict=True))


def test_a_revoked_key_is_refused_by_every_web_process_within_the_cache_bound(nodes: list[Node]) -> None:
    tenant = make_tenant(f"revoke-{uuid.uuid4().hex[:6]}")
    # Every worker of both nodes has looked the key up (and now remembers it) just before the revocation.
    assert everywhere(nodes, tenant.key) == {"A": {200}, "B": {200}}

    # No web process revokes it: both nodes can learn it only from the database.
    tenancy.api_key_revoke(api_key=tenant.api_key)
    revoked = time.monotonic()
    refused_from = revoked + CACHE_SECONDS + SLACK_SECONDS
    last_accepted = {node.name: revoked for node in nodes}  # when the latest request answered 200 was sent
    first_refused: dict[str, float] = {}

    def poll(node: Node) -> None:
        sent = time.monotonic()
        status = authenticated_status(node, tenant.key)
        assert status in (200, 401), status
        if status == 200:
            last_accepted[node.name] = max(last_accepted[node.name], sent)
        else:
            first_refused.setdefault(node.name, round(time.monotonic() - revoked, 3))

    # Past the bound, and until each node has refused once (a late refusal fails the asserts below).
    with ThreadPoolExecutor(max_workers=4) as pool:
        while time.monotonic() < refused_from or (
            len(first_refused) < len(nodes) and time.monotonic() < refused_from + 5
        ):
            list(pool.map(poll, [node for node in nodes for _ in range(WORKERS)]))
            time.sleep(0.05)
    # From the bound on, every worker of each node refuses it.
    assert everywhere(nodes, tenant.key) == {"A": {401}, "B": {401}}

    accepted_until = {name: round(sent - revoked, 3) for name, sent in last_accepted.items()}
    print(f"after the revocation: last 200 sent at {accepted_until} s, first 401 at {first_refused} s")
    assert all(seconds <= CACHE_SECONDS + SLACK_SECONDS for seconds in accepted_until.values()), accepted_until
    assert all(seconds <= CACHE_SECONDS + SLACK_SECONDS for seconds in first_refused.values()), first_refused

    # A key minted now was never seen by any process (misses are not remembered): it works at once.
    _, fresh = tenancy.api_key_create(team=tenant.team, name="fresh")
    assert everywhere(nodes, fresh) == {"A": {200}, "B": {200}}


def create_session(node: Node, tenant: Tenant) -> str:
    response = node.post("/api/v1/sessions/", tenant.key, json={"system_prompt": "You are a planner."})
    assert response.status_code == 201, response.text
    return response.json()["id"]


def test_usage_totals_read_from_either_node_agree_with_what_both_served(nodes: list[Node]) -> None:
    a, b = nodes
    tenant = make_tenant(f"usage-{uuid.uuid4().hex[:6]}")
    session_id = create_session(a, tenant)
    # (the node that appends, the node that serves the context, the agent it is for)
    turns = [(a, b, "planner"), (b, a, "critic"), (a, a, "planner"), (b, b, "critic"), (b, a, "planner")]
    expected = {
        agent: dict.fromkeys(
            (
                "contexts_served",
                "raw_tokens",
                "served_tokens",
                "saved_tokens",
                "window_kept_out_tokens",
                "compaction_saved_tokens",
            ),
            0,
        )
        for agent in ("planner", "critic")
    }
    for n, (writer, reader, agent) in enumerate(turns):
        message = {"role": "assistant", "name": agent, "content": f"turn {n}: " + "plan step " * (5 + n)}
        response = writer.post(f"/api/v1/sessions/{session_id}/messages/", tenant.key, json=message)
        assert response.status_code == 201, response.text
        # The latest message only: the context is smaller than the history, so it saves tokens.
        response = reader.get(f"/api/v1/sessions/{session_id}/context/", tenant.key, params={"agent": agent, "last": 1})
        assert response.status_code == 200, response.text
        session = Session.objects.get(pk=session_id)
        raw, served = session.system_prompt_tokens + session.history_tokens, response.json()["token_count"]
        figures = expected[agent]
        figures["contexts_served"] += 1
        figures["raw_tokens"] += raw
        figures["served_tokens"] += served
        figures["saved_tokens"] += max(raw - served, 0)
        # A plain session: all of it is the window's (everything but the latest message).
        latest = session.messages.order_by("-seq").values_list("token_count", flat=True).first()
        figures["window_kept_out_tokens"] += session.history_tokens - latest
    last_read = time.monotonic()

    def usage(node: Node) -> dict[str, Any]:
        response = node.get("/api/v1/usage/", tenant.key, params={"group_by": "agent"})
        assert response.status_code == 200, response.text
        return response.json()

    # Each web process holds its context-ledger rows and writes them every LEDGER_FLUSH_SECONDS
    # from a background thread (memory_app/usage/context_ledger.py); no request flushes them,
    # so in a deployment the figures lag by up to one interval. Wait for that timer, as a
    # client would, with slack for a busy machine; stopping the nodes would flush too, but no
    # deployment restarts to be counted.
    def both_nodes_count_every_read() -> bool:
        return all(usage(node)["totals"]["contexts_served"] == len(turns) for node in nodes)

    wait_for(both_nodes_count_every_read, timeout=LEDGER_FLUSH_SECONDS + 4, what="the ledger flush")
    print(f"usage complete on both nodes {time.monotonic() - last_read:.2f} s after the last read")

    from_a, from_b = usage(a), usage(b)
    assert (from_a["totals"], from_a["groups"]) == (from_b["totals"], from_b["groups"])
    nothing_spent = {"llm_calls": 0, "llm_errors": 0, "budget_refusals": 0, "prompt_tokens": 0, "completion_tokens": 0}
    saved = sum(figures["saved_tokens"] for figures in expected.values())
    assert saved > 0
    assert from_a["totals"] == {
        **nothing_spent,
        **{name: sum(figures[name] for figures in expected.values()) for name in expected["planner"]},
        "spent_tokens": 0,
        "net_tokens": saved,
    }
    assert {group["key"]: group["figures"] for group in from_a["groups"]} == {
        agent: {**nothing_spent, **figures, "spent_tokens": 0, "net_tokens": figures["saved_tokens"]}
        for agent, figures in expected.items()
    }


def test_an_idempotent_write_sent_again_to_the_other_node_is_replayed_not_stored_twice(nodes: list[Node]) -> None:
    a, b = nodes
    tenant = make_tenant(f"idem-{uuid.uuid4().hex[:6]}")
    session_id = create_session(a, tenant)
    path = f"/api/v1/sessions/{session_id}/messages/"
    key = {"Idempotency-Key": f"retry-{uuid.uuid4()}"}
    body = {"role": "user", "content": "book the flight"}

    first = a.post(path, tenant.key, json=body, headers=key)
    again = b.post(path, tenant.key, json=body, headers=key)
    assert (first.status_code, again.status_code) == (201, 201), again.text
    assert again.json() == first.json()
    assert ("Idempotent-Replayed" in first.headers, again.headers.get("Idempotent-Replayed")) == (False, "true")
    assert Message.objects.filter(session_id=session_id).count() == 1

    # The same key with another body: B refuses it as A does, and nothing is written.
    other = {"role": "user", "content": "book the train"}
    refused = {node.name: node.post(path, tenant.key, json=other, headers=key) for node in nodes}
    assert {name: response.status_code for name, response in refused.items()} == {"A": 422, "B": 422}
    assert refused["B"].json() == refused["A"].json()
    assert refused["B"].json()["error"] == "idempotency_key_reused"
    assert list(Message.objects.filter(session_id=session_id).values_list("content", flat=True)) == [body["content"]]


@pytest.mark.parametrize("listener, actor", [(1, 0), (0, 1)], ids=["B-hears-A", "A-hears-B"])
def test_an_event_caused_through_one_node_reaches_a_stream_open_on_the_other(
    nodes: list[Node], listener: int, actor: int
) -> None:
    listening, acting = nodes[listener], nodes[actor]
    tenant = make_tenant(f"sse-{uuid.uuid4().hex[:6]}")
    session_id = create_session(acting, tenant)
    with listening.http.stream(
        "GET",
        f"{listening.url}/api/v1/events/stream/",
        params={"session": session_id},
        headers={**bearer(tenant.key), "Accept": "text/event-stream"},
    ) as response:
        assert response.status_code == 200
        messages = parse(response.iter_lines())
        assert str(next(messages)).startswith(": stream open after event")
        reset = acting.post(f"/api/v1/sessions/{session_id}/reset/", tenant.key)
        assert reset.status_code == 200, reset.text
        # Heartbeats keep lines coming, and the stream ends by itself after MEMSITE_SSE_MAX_SECONDS.
        received = next((message for message in messages if isinstance(message, Sse)), None)
    event = MemoryEvent.objects.get(session_id=session_id, kind=MemoryEvent.Kind.RESET)
    assert received is not None, f"node {listening.name} never sent the reset made through node {acting.name}"
    assert (received.id, received.event, received.data["session_id"]) == (event.pk, "reset", session_id)
