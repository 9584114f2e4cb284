"""Small records kept for a while: traces, idempotency keys, conversation results,
the field lists of tool responses.

Redis when configured (shared by every worker and replica), else a bounded
in-process map with the same expiry rules. Values are bytes; callers encode.
Each use opens a store of its own, with its own bound, so one kind of record
never pushes out another.

The contract both backends keep (``tests/proxy/test_kv.py`` runs one suite over
both): an entry lives until its TTL, ``add`` stores only into an empty key, and
failures are toolgraph's own errors:

* :class:`~proxy.errors.StoreUnavailable` when Redis cannot be reached (its
  ``RedisError`` is translated here, where it enters);
* :class:`~proxy.errors.StoreFull` from a ``MemoryKeyValue(evict=False)`` with no
  room for a new key: a store of promises (idempotency keys) refuses new ones
  rather than break old ones. With ``evict=True`` (caches, traces) the least
  recently written entry goes instead.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Awaitable
from typing import Protocol, TypeVar

from redis.asyncio import Redis
from redis.exceptions import RedisError

from proxy.errors import StoreFull, StoreUnavailable

PREFIX = "toolgraph:"
T = TypeVar("T")


class KeyValue(Protocol):
    async def get(self, key: str) -> bytes | None: ...

    async def put(self, key: str, value: bytes, ttl: int) -> None: ...

    async def add(self, key: str, value: bytes, ttl: int) -> bool:
        """Store ``value`` only if ``key`` holds nothing; whether it was stored."""
        ...

    async def delete(self, key: str) -> None: ...


class MemoryKeyValue:
    """At most ``max_items`` live entries; past that, the least recently written one
    goes (``evict=True``) or a new key is refused with ``StoreFull``."""

    def __init__(self, max_items: int, *, evict: bool = True) -> None:
        self._max_items = max_items
        self._evict = evict
        self._items: OrderedDict[str, tuple[float, bytes]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

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
        if key not in self._items:
            self._make_room()
        self._items.pop(key, None)
        self._items[key] = (time.monotonic() + ttl, value)

    async def add(self, key: str, value: bytes, ttl: int) -> bool:
        if await self.get(key) is not None:
            return False
        await self.put(key, value, ttl)
        return True

    async def delete(self, key: str) -> None:
        self._items.pop(key, None)

    def _make_room(self) -> None:
        """Room for one new key: expired entries go first, from the oldest write on."""
        now = time.monotonic()
        while self._items and next(iter(self._items.values()))[0] <= now:
            self._items.popitem(last=False)
        if len(self._items) < self._max_items:
            return
        if not self._evict:
            raise StoreFull(f"{self._max_items} entries kept, none expired yet")
        while len(self._items) >= self._max_items:
            self._items.popitem(last=False)


class RedisKeyValue:
    def __init__(self, redis: Redis) -> None:
        self._redis = redis

    async def get(self, key: str) -> bytes | None:
        value = await _reached(self._redis.get(PREFIX + key))
        return value.encode() if isinstance(value, str) else value

    async def put(self, key: str, value: bytes, ttl: int) -> None:
        await _reached(self._redis.set(PREFIX + key, value, ex=ttl))

    async def add(self, key: str, value: bytes, ttl: int) -> bool:
        return bool(await _reached(self._redis.set(PREFIX + key, value, ex=ttl, nx=True)))

    async def delete(self, key: str) -> None:
        await _reached(self._redis.delete(PREFIX + key))


async def _reached(command: Awaitable[T]) -> T:
    try:
        return await command
    except RedisError as exc:
        # the class only: redis' own text names internal hosts and ports, and this
        # message may reach a client (a trace lookup's 503)
        raise StoreUnavailable(f"Redis cannot be reached ({type(exc).__name__})") from None


def open_key_value(redis: Redis | None, max_items: int, *, evict: bool = True) -> KeyValue:
    """Redis when there is one, else an in-process store of ``max_items``."""
    return RedisKeyValue(redis) if redis is not None else MemoryKeyValue(max_items, evict=evict)
