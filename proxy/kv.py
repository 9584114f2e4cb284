"""Small records kept for a while: traces, idempotency keys, conversation results,
the field lists of tool responses.

Redis when configured (shared by every worker and replica), else a bounded
in-process map with the same expiry rules. Values are bytes; callers encode.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import Protocol

from redis.asyncio import Redis

PREFIX = "toolgraph:"


class KeyValue(Protocol):
    async def get(self, key: str) -> bytes | None: ...

    async def put(self, key: str, value: bytes, ttl: int) -> None: ...

    async def add(self, key: str, value: bytes, ttl: int) -> bool:
        """Store ``value`` only if ``key`` holds nothing; whether it was stored."""
        ...

    async def delete(self, key: str) -> None: ...


class MemoryKeyValue:
    """Least recently written entries go first once ``max_items`` is reached."""

    def __init__(self, max_items: int) -> None:
        self._max_items = max_items
        self._items: OrderedDict[str, tuple[float, bytes]] = OrderedDict()

    async def get(self, key: str) -> bytes | None:
        item = self._items.get(key)
        if item is None:
            return None
        expires, value = item
        if expires <= time.monotonic():
            del self._items[key]
            return None
        return value

    async def put(self, key: str, value: bytes, ttl: int) -> None:
        self._items.pop(key, None)
        self._items[key] = (time.monotonic() + ttl, value)
        while len(self._items) > self._max_items:
            self._items.popitem(last=False)

    async def add(self, key: str, value: bytes, ttl: int) -> bool:
        if await self.get(key) is not None:
            return False
        await self.put(key, value, ttl)
        return True

    async def delete(self, key: str) -> None:
        self._items.pop(key, None)


class RedisKeyValue:
    def __init__(self, redis: Redis) -> None:
        self._redis = redis

    async def get(self, key: str) -> bytes | None:
        value = await self._redis.get(PREFIX + key)
        return value.encode() if isinstance(value, str) else value

    async def put(self, key: str, value: bytes, ttl: int) -> None:
        await self._redis.set(PREFIX + key, value, ex=ttl)

    async def add(self, key: str, value: bytes, ttl: int) -> bool:
        return bool(await self._redis.set(PREFIX + key, value, ex=ttl, nx=True))

    async def delete(self, key: str) -> None:
        await self._redis.delete(PREFIX + key)


def open_key_value(redis: Redis | None, max_items: int) -> KeyValue:
    return RedisKeyValue(redis) if redis is not None else MemoryKeyValue(max_items)
