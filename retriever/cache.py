"""Embedding caches keyed by model + text: an in-process LRU, Redis, or both in layers.

Every cache speaks :class:`EmbeddingCache`; the tests run one suite over each.
Vectors are stored as raw float32 bytes. A Redis that cannot be reached is a cache
that misses (and stores nothing), never a failed request: the vectors are computed
again, with one warning a minute.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections import OrderedDict
from collections.abc import Sequence
from typing import Protocol

import numpy as np
from redis.asyncio import Redis
from redis.exceptions import RedisError

from retriever.embedder import Vectors

Vector = Vectors  # one row
log = logging.getLogger(__name__)
#: Seconds between two warnings that Redis cannot be reached.
WARN_EVERY = 60.0


class EmbeddingCache(Protocol):
    async def get_many(self, model: str, texts: Sequence[str]) -> list[Vector | None]: ...

    async def put_many(self, model: str, texts: Sequence[str], vectors: Vectors) -> None: ...


def cache_key(model: str, text: str) -> str:
    digest = hashlib.blake2b(f"{model}\0{text}".encode(), digest_size=20).hexdigest()
    return f"toolgraph:emb:{digest}"


class LRUCache:
    """In-process, bounded by entry count; ``size == 0`` caches nothing."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._entries: OrderedDict[str, Vector] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    async def get_many(self, model: str, texts: Sequence[str]) -> list[Vector | None]:
        found: list[Vector | None] = []
        for text in texts:
            key = cache_key(model, text)
            vector = self._entries.get(key)
            if vector is not None:
                self._entries.move_to_end(key)
            found.append(vector)
        return found

    async def put_many(self, model: str, texts: Sequence[str], vectors: Vectors) -> None:
        if self._size == 0:
            return
        for text, vector in zip(texts, vectors, strict=True):
            self._entries[cache_key(model, text)] = vector
            self._entries.move_to_end(cache_key(model, text))
        while len(self._entries) > self._size:
            self._entries.popitem(last=False)


class RedisCache:
    """Shared by every proxy pod; entries expire after ``ttl_s``."""

    def __init__(self, redis: Redis, ttl_s: int) -> None:
        self._redis = redis
        self._ttl_s = ttl_s
        self._warned: float | None = None

    async def get_many(self, model: str, texts: Sequence[str]) -> list[Vector | None]:
        if not texts:
            return []
        try:
            raw = await self._redis.mget([cache_key(model, text) for text in texts])
        except RedisError as exc:
            self._down(exc)
            return [None] * len(texts)
        return [None if value is None else _decode(value) for value in raw]

    async def put_many(self, model: str, texts: Sequence[str], vectors: Vectors) -> None:
        if not texts:
            return
        try:
            async with self._redis.pipeline(transaction=False) as pipe:
                for text, vector in zip(texts, vectors, strict=True):
                    pipe.set(
                        cache_key(model, text), vector.astype(np.float32).tobytes(), ex=self._ttl_s
                    )
                await pipe.execute()
        except RedisError as exc:
            self._down(exc)

    def _down(self, error: RedisError) -> None:
        now = time.monotonic()
        if self._warned is None or now - self._warned >= WARN_EVERY:
            self._warned = now
            log.warning("embedding cache: Redis cannot be reached (%s); computing instead", error)


class LayeredCache:
    """The LRU in front of Redis: a Redis hit is copied into the LRU."""

    def __init__(self, near: LRUCache, far: EmbeddingCache) -> None:
        self._near = near
        self._far = far

    async def get_many(self, model: str, texts: Sequence[str]) -> list[Vector | None]:
        found = await self._near.get_many(model, texts)
        missing = [i for i, vector in enumerate(found) if vector is None]
        if not missing:
            return found
        far = await self._far.get_many(model, [texts[i] for i in missing])
        refill = [
            (texts[i], vector) for i, vector in zip(missing, far, strict=True) if vector is not None
        ]
        for i, vector in zip(missing, far, strict=True):
            found[i] = vector
        if refill:
            await self._near.put_many(
                model, [text for text, _ in refill], np.stack([v for _, v in refill])
            )
        return found

    async def put_many(self, model: str, texts: Sequence[str], vectors: Vectors) -> None:
        await self._near.put_many(model, texts, vectors)
        await self._far.put_many(model, texts, vectors)


def _decode(value: bytes | str) -> Vector:
    data = value.encode("latin-1") if isinstance(value, str) else value
    return np.frombuffer(data, dtype=np.float32)
