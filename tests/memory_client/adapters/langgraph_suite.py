"""What LangGraph's own store tests (test_langgraph_store_suite.py, test_langgraph_store_batches.py,
vendored) run against: the store they build, and the tests that cannot apply to a remote store.

The vendored modules import `RemoteStore` in place of LangGraph's InMemoryStore. Each one is a
MemsiteStore on the live server of the running test (the `memsite_store_server` fixture sets the
connection), in a session of its own, as every InMemoryStore() starts empty.
"""

from __future__ import annotations

import uuid
from typing import Any, ClassVar

from memory_client.adapters.langgraph import MemsiteStore

# Test name (as written, without parameters) -> why it does not apply to a memsite store. The
# adapters' conftest deselects them and prints this list at the end of the run.
_OWN_RANKING = (
    "builds the store with LangGraph's test embeddings (an `index` config) and asserts the scores they give; "
    "memsite ranks a query with its own hybrid search (its embedding model, BM25 and recency), which a "
    "store's `index` setting does not replace"
)
NOT_APPLICABLE: dict[str, str] = {
    name: _OWN_RANKING
    for name in (
        "test_vector_store_initialization",
        "test_vector_insert_with_auto_embedding",
        "test_async_vector_insert_with_auto_embedding",
        "test_vector_update_with_embedding",
        "test_async_vector_update_with_embedding",
        "test_vector_search_with_filters",
        "test_async_vector_search_with_filters",
        "test_async_batched_vector_search_concurrent",
        "test_vector_search_scores_every_item",
        "test_embed_with_path",
    )
}
SUITE_MODULES = ("test_langgraph_store_suite.py", "test_langgraph_store_batches.py")


class RemoteStore(MemsiteStore):
    """LangGraph's InMemoryStore, as its tests build one, swapped for a MemsiteStore on the live server."""

    connection: ClassVar[dict[str, str]] = {}
    opened: ClassVar[list[MemsiteStore]] = []

    def __init__(self, **config: Any) -> None:
        # `config` is InMemoryStore's (an `index`): memsite indexes every item itself (see NOT_APPLICABLE).
        if not self.connection:
            raise RuntimeError("RemoteStore needs the memsite_store_server fixture")
        super().__init__(f"langgraph-suite-{uuid.uuid4().hex[:12]}", **self.connection)
        self.opened.append(self)
