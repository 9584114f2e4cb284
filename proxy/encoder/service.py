"""The app's embedding model, with its batcher and caches: one copy, shared.

Select mode embeds the client's tools and the conversation through the batcher; the
catalog indexes its tools and plans with the model itself. Both take it from here, so
the model is loaded once and its vectors are cached once.

The model loads in a worker thread, on first use: with the catalog in the background
from start-up (``orchestrate.preload``, the default), else on the first select
request or at start-up with ``retriever.preload``; with neither, passthrough never
imports torch. The batcher (:class:`~retriever.batching.BatchingEmbedder`) gathers the
texts of requests that arrive together into one forward pass; its cache is in
process, and layered over Redis when one is configured, so that a process finds the
vectors another one embedded. The model's absence (:class:`ModelNotFound`) is
translated here, where it enters the proxy.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from redis.asyncio import Redis

from proxy.errors import ToolgraphError
from retriever.config import RetrieverConfig
from retriever.errors import ModelNotFound

if TYPE_CHECKING:  # loaded with the model, so that passthrough never imports them
    from retriever.batching import BatchingEmbedder
    from retriever.cache import LRUCache
    from retriever.embedder import Encoder


class RetrieverUnavailable(ToolgraphError):
    status = 503
    type = "server_error"
    code = "retriever_unavailable"


class EncoderService:
    """``redis``: the vector cache processes share, when configured. ``embeddings``: the
    in-process vector cache, when the caller shares one between apps of a process (the
    tests do, so that a tool list is embedded once per run); else each app makes its own."""

    def __init__(
        self,
        config: RetrieverConfig,
        redis: Redis | None = None,
        embeddings: LRUCache | None = None,
    ) -> None:
        self._config = config
        self._redis = redis
        self._embeddings = embeddings
        self._embedder: BatchingEmbedder | None = None
        self._lock = asyncio.Lock()

    async def start(self) -> BatchingEmbedder:
        """Load the model now, once (a :class:`ModelNotFound` here stops start-up); its
        batcher."""
        if self._embedder is not None:
            return self._embedder
        async with self._lock:
            if self._embedder is None:
                self._embedder = await asyncio.to_thread(self._load)
            return self._embedder

    async def embedder(self, purpose: str = "the embedding model") -> BatchingEmbedder:
        """The model's batcher; :class:`RetrieverUnavailable` without the model, naming
        ``purpose`` (what cannot run)."""
        try:
            return await self.start()
        except ModelNotFound as exc:
            raise RetrieverUnavailable(f"{purpose} is unavailable: {exc}") from None

    async def encoder(self) -> Encoder:
        """The loaded model itself (the catalog indexes and plans with it)."""
        return (await self.embedder()).encoder

    def batching(self, encoder: Encoder) -> BatchingEmbedder:
        """A batcher for ``encoder`` (the no-tool gate's, which may be another model): the
        model's own when it is the same, else one over the same in-process cache."""
        from retriever.batching import BatchingEmbedder

        if self._embedder is not None and encoder is self._embedder.encoder:
            return self._embedder
        window = self._config.batch_window_ms
        return BatchingEmbedder(encoder, self._in_process(), window_ms=window)

    def close(self) -> None:
        if self._embedder is not None:
            self._embedder.close()

    def _in_process(self) -> LRUCache:
        from retriever.cache import LRUCache

        if self._embeddings is None:  # not `or`: an empty cache is falsy
            self._embeddings = LRUCache(self._config.cache_size)
        return self._embeddings

    def _load(self) -> BatchingEmbedder:
        from retriever.batching import BatchingEmbedder
        from retriever.cache import EmbeddingCache, LayeredCache, RedisCache
        from retriever.embedder import load_encoder

        encoder = load_encoder(self._config)
        lru = self._in_process()
        cache: EmbeddingCache = lru
        if self._redis is not None:
            cache = LayeredCache(lru, RedisCache(self._redis, self._config.cache_ttl_s))
        return BatchingEmbedder(
            encoder, cache, window_ms=self._config.batch_window_ms, max_batch=self._config.max_batch
        )
