"""Select mode, without HTTP: rewrite a request's ``tools`` to the few it needs.

The model loads on the first select request (or at start-up with
``retriever.preload``), in a worker thread, so that passthrough never imports torch.
The retriever's errors are translated here, where they enter the proxy.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from redis.asyncio import Redis

from proxy import metrics
from proxy.chat.protocol import ChatCompletionRequest
from proxy.errors import InvalidRequest, ToolgraphError
from retriever.config import RetrieverConfig
from retriever.errors import InvalidTools, ModelNotFound

if TYPE_CHECKING:
    from retriever.embedder import Encoder

log = logging.getLogger(__name__)


class RetrieverUnavailable(ToolgraphError):
    status = 503
    type = "server_error"
    code = "retriever_unavailable"


class SelectService:
    def __init__(self, config: RetrieverConfig, redis: Redis | None = None) -> None:
        self._config = config
        self._redis = redis
        self._selector: Any = None  # retriever.select.ToolSelector, imported on first use
        self._embedder: Any = None
        self._lock = asyncio.Lock()

    async def start(self) -> None:
        """Load the model now (a :class:`ModelNotFound` here stops start-up)."""
        async with self._lock:
            if self._selector is None:
                self._selector, self._embedder = await asyncio.to_thread(self._load)

    async def encoder(self) -> Encoder:
        """The loaded embedding model, shared with orchestrate mode's catalog."""
        try:
            await self.start()
        except ModelNotFound as exc:
            raise RetrieverUnavailable(f"the embedding model is unavailable: {exc}") from None
        encoder: Encoder = self._embedder.encoder
        return encoder

    def close(self) -> None:
        if self._embedder is not None:
            self._embedder.close()

    async def rewrite(self, request: ChatCompletionRequest, body: dict[str, Any]) -> dict[str, Any]:
        """``body`` with ``tools`` cut down to the ones the conversation needs."""
        tools = body.get("tools")
        if not tools:
            raise InvalidRequest(
                "select mode needs the tools to choose from: 'tools' is missing or empty",
                param="tools",
                code="missing_tools",
            )
        options = request.toolgraph
        assert options is not None
        try:
            await self.start()
        except ModelNotFound as exc:
            raise RetrieverUnavailable(f"select mode is unavailable: {exc}") from None
        from retriever.select import SelectOptions

        select_options = SelectOptions(
            top_k=options.top_k or self._config.select_top_k,
            threshold=self._config.select_threshold
            if options.threshold is None
            else options.threshold,
            min_tools=self._config.select_min_tools,
        )
        hits, misses = self._embedder.stats.cache_hits, self._embedder.stats.cache_misses
        try:
            selection = await self._selector.select(
                tools, body["messages"], select_options, body.get("tool_choice")
            )
        except InvalidTools as exc:
            raise InvalidRequest(str(exc), param=exc.param, code="invalid_tools") from None
        stats = self._embedder.stats
        metrics.CACHE_LOOKUPS.labels("embedding", "hit").inc(stats.cache_hits - hits)
        metrics.CACHE_LOOKUPS.labels("embedding", "miss").inc(stats.cache_misses - misses)
        metrics.TOOLS_SELECTED.labels("select", "offered").inc(selection.offered)
        metrics.TOOLS_SELECTED.labels("select", "injected").inc(len(selection.tools))
        log.info(
            "select: %d of %d tools forwarded (%s), %d enums trimmed",
            len(selection.tools),
            selection.offered,
            ", ".join(selection.kept),
            selection.trimmed_enums,
        )
        return {**body, "tools": selection.tools}

    def _load(self) -> tuple[Any, Any]:
        from retriever.batching import BatchingEmbedder
        from retriever.cache import EmbeddingCache, LayeredCache, LRUCache, RedisCache
        from retriever.embedder import load_encoder
        from retriever.select import ToolSelector

        encoder = load_encoder(self._config)
        lru = LRUCache(self._config.cache_size)
        cache: EmbeddingCache = lru
        if self._redis is not None:
            cache = LayeredCache(lru, RedisCache(self._redis, self._config.cache_ttl_s))
        embedder = BatchingEmbedder(
            encoder,
            cache,
            window_ms=self._config.batch_window_ms,
            max_batch=self._config.max_batch,
        )
        return ToolSelector(embedder, self._config), embedder
