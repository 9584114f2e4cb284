"""OwnedClient: every call on the client's own thread, never blocking an event loop."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest
from qdrant_client import QdrantClient

from retriever.errors import VectorStoreError
from retriever.owned_client import OwnedClient


@pytest.fixture
def owned() -> Iterator[OwnedClient]:
    client = OwnedClient(QdrantClient(location=":memory:"))
    yield client
    client.close()


def thread_of(client: QdrantClient) -> str:
    return threading.current_thread().name


async def test_a_coroutine_awaits_the_owning_thread_and_may_not_block_on_it(
    owned: OwnedClient,
) -> None:
    assert (await owned.run(thread_of)).startswith("qdrant")
    with pytest.raises(RuntimeError, match=r"await OwnedClient\.run"):
        owned.call(thread_of)
    # A worker thread waits for the owning thread; work on it may call again.
    assert (await asyncio.to_thread(owned.call, thread_of)).startswith("qdrant")
    assert (await owned.run(lambda _: owned.call(thread_of))).startswith("qdrant")


async def test_qdrants_failures_come_out_as_one_error(owned: OwnedClient) -> None:
    with pytest.raises(VectorStoreError, match="Qdrant failed: ValueError"):
        await owned.run(lambda c: c.count("no-such-collection"))
