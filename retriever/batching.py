"""Micro-batching: queries that arrive within a window share one forward pass.

A request's texts are first looked up in the cache; the misses join the pending
batch, ``max_batch`` at a time and shortest first, which is flushed when the window
(``batch_window_ms``) closes or ``max_batch`` texts are waiting. Passes run one at a
time on a single worker thread, so the event loop never blocks on the model and the
model never runs two passes at once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from retriever.cache import EmbeddingCache
from retriever.embedder import Encoder, Vectors

log = logging.getLogger(__name__)


@dataclass
class EmbedStats:
    passes: int = 0
    encoded: int = 0
    cache_hits: int = 0
    cache_misses: int = 0
    largest_pass: int = 0


@dataclass
class _Waiter:
    texts: list[str]
    future: asyncio.Future[Vectors]


class BatchingEmbedder:
    def __init__(
        self,
        encoder: Encoder,
        cache: EmbeddingCache,
        *,
        window_ms: float = 2.0,
        max_batch: int = 64,
    ) -> None:
        self.encoder = encoder
        self.stats = EmbedStats()
        self._cache = cache
        self._window_s = window_ms / 1000
        self._max_batch = max_batch
        self._pending: list[_Waiter] = []
        self._pending_texts = 0
        self._timer: asyncio.TimerHandle | None = None
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="toolgraph-embed")
        self._running: set[asyncio.Task[None]] = set()

    @property
    def dim(self) -> int:
        return self.encoder.dim

    async def embed(self, texts: Sequence[str]) -> Vectors:
        """One normalised row per text, from the cache or a shared forward pass."""
        if not texts:
            return np.zeros((0, self.encoder.dim), dtype=np.float32)
        found = await self._cache.get_many(self.encoder.name, texts)
        misses = list(dict.fromkeys(t for t, v in zip(texts, found, strict=True) if v is None))
        self.stats.cache_hits += len(texts) - sum(v is None for v in found)
        self.stats.cache_misses += len(misses)
        if misses:
            by_text = await self._encode_missing(misses)
            found = [by_text[t] if v is None else v for t, v in zip(texts, found, strict=True)]
        stacked: Vectors = np.stack([v for v in found if v is not None])
        return stacked

    async def embed_one(self, text: str) -> Vectors:
        vectors = await self.embed([text])
        row: Vectors = vectors[0]
        return row

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)

    async def _encode_missing(self, misses: list[str]) -> dict[str, Vectors]:
        """The vectors of ``misses``, shortest texts first, ``max_batch`` at a time (each
        pass is cached as soon as it is done, by :meth:`_run`).

        A pass pads every text to its longest, so passes of similar lengths compute
        about 1.6x fewer token positions over a client's tool list (toolbench's tools:
        every unsorted pass of 64 held one of 256 tokens). Caching pass by pass leaves
        what a cancelled request (a client gone, a timeout) paid for to its retry and to
        other processes, and between two passes another request's query gets its turn
        on the worker."""
        ordered = sorted(misses, key=len)
        by_text: dict[str, Vectors] = {}
        for start in range(0, len(ordered), self._max_batch):
            chunk = ordered[start : start + self._max_batch]
            fresh = await self._encode_in_batch(chunk)
            by_text.update(zip(chunk, fresh, strict=True))
        return by_text

    async def _encode_in_batch(self, texts: list[str]) -> Vectors:
        loop = asyncio.get_running_loop()
        waiter = _Waiter(texts, loop.create_future())
        self._pending.append(waiter)
        self._pending_texts += len(texts)
        if self._pending_texts >= self._max_batch:
            self._flush()
        elif self._timer is None:
            self._timer = loop.call_later(self._window_s, self._flush)
        return await waiter.future

    def _flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        batch, self._pending, self._pending_texts = self._pending, [], 0
        if batch:
            task = asyncio.get_running_loop().create_task(self._run(batch))
            self._running.add(task)
            task.add_done_callback(self._running.discard)

    async def _run(self, batch: list[_Waiter]) -> None:
        texts = sorted(dict.fromkeys(t for waiter in batch for t in waiter.texts), key=len)
        loop = asyncio.get_running_loop()
        try:
            parts = []
            for start in range(0, len(texts), self._max_batch):
                chunk = texts[start : start + self._max_batch]
                parts.append(await loop.run_in_executor(self._executor, self.encoder.encode, chunk))
                self.stats.passes += 1
                self.stats.encoded += len(chunk)
                self.stats.largest_pass = max(self.stats.largest_pass, len(chunk))
            vectors = np.concatenate(parts)
        except Exception as exc:  # every waiter of the pass gets the model's error
            for waiter in batch:
                if not waiter.future.done():
                    waiter.future.set_exception(exc)
            return
        # Cached here, not by the caller: a pass whose caller was cancelled is kept too.
        await self._cache.put_many(self.encoder.name, texts, vectors)
        row = {text: i for i, text in enumerate(texts)}
        for waiter in batch:
            if not waiter.future.done():
                waiter.future.set_result(vectors[[row[t] for t in waiter.texts]])
