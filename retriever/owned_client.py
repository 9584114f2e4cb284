"""A Qdrant client owned by one thread: every call to it runs there, one at a time.

Qdrant's local mode (``path=`` or ``:memory:``) keeps each collection in numpy
arrays and one SQLite connection, and is not thread-safe: two upserts at once, or a
search during one, put the arrays out of step for good (``operands could not be
broadcast together with shapes (689,) (688,)``, ``cannot start a transaction
within a transaction``) and every later search of that collection fails. The
proxy reads the plan memory on the request path, writes it in the background and
re-syncs the catalog's collection in a worker thread, all over one client (local
mode allows one per folder): so nothing touches the client but its own thread.

A coroutine awaits :meth:`OwnedClient.run` (the event loop never blocks on Qdrant);
code already in a worker thread calls :meth:`OwnedClient.call`. A server (``url=``)
goes through the same thread: its calls are a few milliseconds each and few per
request (one recall per plan, one write after it).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from qdrant_client import QdrantClient

from retriever.errors import VectorStoreError

T = TypeVar("T")


class OwnedClient:
    def __init__(self, client: QdrantClient) -> None:
        self._client = client
        self._mine = threading.local()
        self._thread = ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="qdrant", initializer=self._claim
        )

    @property
    def is_local(self) -> bool:
        """Whether the client is Qdrant's local mode rather than a server."""
        return type(self._client._client).__name__ == "QdrantLocal"

    async def run(self, work: Callable[[QdrantClient], T]) -> T:
        """``work(client)`` on the owning thread, awaited (from a coroutine)."""
        return await asyncio.wrap_future(self._thread.submit(self._guarded, work))

    def call(self, work: Callable[[QdrantClient], T]) -> T:
        """``work(client)`` on the owning thread, waited for (from a worker thread)."""
        if getattr(self._mine, "owner", False):  # a call made by work already running here
            return self._guarded(work)
        if _in_event_loop():
            raise RuntimeError("a coroutine must await OwnedClient.run: call blocks its loop")
        return self._thread.submit(self._guarded, work).result()

    def close(self) -> None:
        """Close the client once the calls queued before are done."""
        self._thread.submit(self._client.close).result()
        self._thread.shutdown()

    def _claim(self) -> None:
        self._mine.owner = True

    def _guarded(self, work: Callable[[QdrantClient], T]) -> T:
        try:
            return work(self._client)
        except VectorStoreError:
            raise
        except Exception as exc:  # Qdrant's, numpy's, SQLite's or the network's: one kind
            raise VectorStoreError(f"Qdrant failed: {type(exc).__name__}: {exc}") from exc


def _in_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
