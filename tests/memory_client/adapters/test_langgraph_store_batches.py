# Vendored from langchain-ai/langgraph. Its licence:
#
# MIT License
#
# Copyright (c) 2024 LangChain, Inc.
#
# Permission is hereby granted, free of charge, to any person obtaining a copy
# of this software and associated documentation files (the "Software"), to deal
# in the Software without restriction, including without limitation the rights
# to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
# copies of the Software, and to permit persons to whom the Software is
# furnished to do so, subject to the following conditions:
#
# The above copyright notice and this permission notice shall be included in all
# copies or substantial portions of the Software.
#
# THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
# IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
# FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
# AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
# LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
# OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
# SOFTWARE.
#
# Two more of LangGraph's store tests, from langchain-ai/langgraph (same licence as above):
# - test_large_batches_async from libs/checkpoint-sqlite/tests/test_async_store.py: 6,000 operations
#   (N=100 x M=10 x 6) gathered at once;
# - test_inmemory_store_search_supports_dotted_filter_keys from
#   libs/checkpoint/tests/test_inmemory_store_dotted_filters.py (its InMemoryStore() swapped too).
# Changes, and only these: the `store` fixture (an AsyncSqliteStore there) builds a MemsiteStore on the
# live server, and `pytestmark` runs the async test with anyio on it; `ruff format` reflowed the lines.
# ruff: noqa
import asyncio

import pytest

from tests.memory_client.adapters.langgraph_suite import RemoteStore
from tests.memory_client.adapters.langgraph_suite import RemoteStore as InMemoryStore

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("memsite_store_server")]


@pytest.fixture
def store() -> RemoteStore:
    return RemoteStore()


async def test_large_batches_async(store: RemoteStore) -> None:
    """Test processing large batch operations asynchronously."""
    N = 100
    M = 10
    coros = []
    for m in range(M):
        for i in range(N):
            coros.append(
                store.aput(
                    ("test", "foo", "bar", "baz", str(m % 2)),
                    f"key{i}",
                    value={"foo": "bar" + str(i)},
                )
            )
            coros.append(
                asyncio.create_task(
                    store.aget(
                        ("test", "foo", "bar", "baz", str(m % 2)),
                        f"key{i}",
                    )
                )
            )
            coros.append(
                asyncio.create_task(
                    store.alist_namespaces(
                        prefix=None,
                        max_depth=m + 1,
                    )
                )
            )
            coros.append(
                asyncio.create_task(
                    store.asearch(
                        ("test",),
                    )
                )
            )
            coros.append(
                store.aput(
                    ("test", "foo", "bar", "baz", str(m % 2)),
                    f"key{i}",
                    value={"foo": "bar" + str(i)},
                )
            )
            coros.append(
                store.adelete(
                    ("test", "foo", "bar", "baz", str(m % 2)),
                    f"key{i}",
                )
            )

    results = await asyncio.gather(*coros)
    assert len(results) == M * N * 6


def test_inmemory_store_search_supports_dotted_filter_keys() -> None:
    store = InMemoryStore()
    store.put(("docs",), "hyphen", {"user": {"access-level": "nested"}})

    results = store.search(("docs",), filter={"user.access-level": "nested"})

    assert [result.key for result in results] == ["hyphen"]
