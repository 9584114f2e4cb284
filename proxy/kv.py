"""Small records kept for a while: traces, idempotency keys, conversation results,
the field lists of tool responses.

Redis when configured (shared by every worker and replica), else an in-process
map. Values are bytes; callers encode. Each use opens a store of its own with its
own :class:`Bound` (a name, how many entries, how large one value) and passes its
own TTL with every write, so one kind of record never pushes out another (``newest``
lists a use's latest entries: the console's list of traces):

* traces: ``orchestrate.max_traces`` entries, the oldest goes; ``TRACE_BYTES``
  (``proxy/orchestrate/records.py``); ``orchestrate.trace_ttl``;
* turn results: ``orchestrate.max_conversations``, the oldest goes;
  ``RESULT_BYTES``; ``orchestrate.conversation_ttl``;
* idempotency keys: ``orchestrate.max_idempotency_keys``, a new key refused while
  all are live; ``ANSWER_BYTES``; ``orchestrate.idempotency_ttl``;
* stored responses (``/v1/responses``): ``responses.max_stored``, the oldest goes;
  ``responses.max_stored_bytes``; ``responses.store_ttl``
  (``proxy/responses_api/store.py``);
* field lists: ``FIELD_LISTS`` (``proxy/execute/service.py``), the oldest goes;
  7 days, 10 minutes for "no list" (``proxy/execute/fields.py``).

The contract both backends keep (``tests/proxy/test_kv.py`` runs one suite over
both): an entry lives until its TTL; ``add`` stores only into an empty key; a use
holds at most ``max_items`` live entries, past which the least recently written
one goes (``evict=True``: caches, traces) or a new key is refused (``evict=False``:
a store of promises, idempotency keys, refuses new ones rather than break old
ones); no value is larger than ``max_value_bytes``; and failures are toolgraph's
own errors:

* :class:`~proxy.errors.StoreUnavailable` when Redis cannot be reached (its
  ``RedisError`` is translated here, where it enters);
* :class:`~proxy.errors.StoreFull` for a value over the bound, or a new key
  refused by a full ``evict=False`` store.

In Redis a use's entries are counted in a sorted set beside them
(``toolgraph:~NAME``: its keys in order of writing) that one Lua script per write
keeps in step, so every worker and replica shares the one bound. In both backends
an entry that expired leaves the count when room is made, from the oldest write on.
The script deletes the entries it evicts by name, which one Redis server (or a
Sentinel's primary) allows; Redis Cluster would want a use's keys in one hash slot.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Protocol, TypeVar

from redis.asyncio import Redis
from redis.exceptions import RedisError

from proxy.errors import StoreFull, StoreUnavailable

PREFIX = "toolgraph:"
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Bound:
    """How much one use of the store may hold."""

    name: str  # the use, unique per app (Redis counts its entries under it)
    max_items: int  # live entries
    max_value_bytes: int  # one value
    evict: bool = True  # full: drop the oldest write (True) or refuse a new key (False)


class KeyValue(Protocol):
    async def get(self, key: str) -> bytes | None: ...

    async def put(self, key: str, value: bytes, ttl: int) -> None: ...

    async def add(self, key: str, value: bytes, ttl: int) -> bool:
        """Store ``value`` only if ``key`` holds nothing; whether it was stored."""
        ...

    async def delete(self, key: str) -> None: ...

    async def newest(self, limit: int, prefix: str = "") -> list[tuple[str, bytes]]:
        """Up to ``limit`` live entries (key, value) of this use whose keys start with
        ``prefix``, the latest written first."""
        ...


class MemoryKeyValue:
    """In process, within ``bound``."""

    def __init__(self, bound: Bound) -> None:
        self.bound = bound
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
        _check_size(self.bound, value)
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

    async def newest(self, limit: int, prefix: str = "") -> list[tuple[str, bytes]]:
        now = time.monotonic()
        found: list[tuple[str, bytes]] = []
        for key, (expires, value) in reversed(self._items.items()):
            if len(found) >= limit:
                break
            if expires > now and key.startswith(prefix):
                found.append((key, value))
        return found

    def _make_room(self) -> None:
        """Room for one new key: expired entries go first, from the oldest write on."""
        now = time.monotonic()
        while self._items and next(iter(self._items.values()))[0] <= now:
            self._items.popitem(last=False)
        if len(self._items) < self.bound.max_items:
            return
        if not self.bound.evict:
            raise StoreFull(_full(self.bound))
        while len(self._items) >= self.bound.max_items:
            self._items.popitem(last=False)


#: One write of a bounded use, atomic: KEYS = the entry, the use's index (its keys
#: in order of writing), the use's write counter (that order: no clock involved);
#: ARGV = value, ttl, max_items, evict, only_if_empty, the key as the index names
#: it, the key prefix. Returns 1 stored, 0 the key was taken (only_if_empty), -1
#: full (evict off).
_WRITE = """
local entry, index, clock = KEYS[1], KEYS[2], KEYS[3]
local value, ttl, most = ARGV[1], ARGV[2], tonumber(ARGV[3])
local evict, only_if_empty, member, prefix = ARGV[4] == '1', ARGV[5] == '1', ARGV[6], ARGV[7]
if only_if_empty and redis.call('EXISTS', entry) == 1 then return 0 end
if not redis.call('ZSCORE', index, member) then
  while true do
    local oldest = redis.call('ZRANGE', index, 0, 0)[1]
    if not oldest or redis.call('EXISTS', prefix .. oldest) == 1 then break end
    redis.call('ZREM', index, oldest)
  end
  local held = redis.call('ZCARD', index)
  if held >= most then
    if not evict then return -1 end
    local gone = redis.call('ZPOPMIN', index, held - most + 1)
    for i = 1, #gone, 2 do redis.call('DEL', prefix .. gone[i]) end
  end
end
redis.call('SET', entry, value, 'EX', ttl)
redis.call('ZADD', index, redis.call('INCR', clock), member)
return 1
"""


class RedisKeyValue:
    """In Redis, within ``bound`` (counted across every process sharing the server)."""

    def __init__(self, redis: Redis, bound: Bound) -> None:
        self._redis = redis
        self.bound = bound
        self._index = f"{PREFIX}~{bound.name}"
        self._write = redis.register_script(_WRITE)

    async def get(self, key: str) -> bytes | None:
        value = await _reached(self._redis.get(PREFIX + key))
        return value.encode() if isinstance(value, str) else value

    async def put(self, key: str, value: bytes, ttl: int) -> None:
        await self._store(key, value, ttl, only_if_empty=False)

    async def add(self, key: str, value: bytes, ttl: int) -> bool:
        return await self._store(key, value, ttl, only_if_empty=True)

    async def delete(self, key: str) -> None:
        async with self._redis.pipeline(transaction=True) as both:
            both.delete(PREFIX + key)
            both.zrem(self._index, key)
            await _reached(both.execute())

    async def newest(self, limit: int, prefix: str = "") -> list[tuple[str, bytes]]:
        # the index keeps an expired key until room is made, and other prefixes' keys:
        # page on past them (a use holds at most max_items, so the walk is bounded)
        found: list[tuple[str, bytes]] = []
        start = 0
        while len(found) < limit:
            end = start + limit - 1
            members = await _reached(self._redis.zrevrange(self._index, start, end))
            if not members:
                break
            keys = [_as_bytes(m).decode() for m in members if isinstance(m, bytes | str)]
            keys = [key for key in keys if key.startswith(prefix)]
            values = await _reached(self._redis.mget([PREFIX + k for k in keys])) if keys else []
            found += [(k, _as_bytes(v)) for k, v in zip(keys, values, strict=True) if v is not None]
            start += limit
        return found[:limit]

    async def _store(self, key: str, value: bytes, ttl: int, *, only_if_empty: bool) -> bool:
        _check_size(self.bound, value)
        flags = [int(self.bound.evict), int(only_if_empty)]
        done = await _reached(
            self._write(
                keys=[PREFIX + key, self._index, self._index + ":clock"],
                args=[value, ttl, self.bound.max_items, *flags, key, PREFIX],
            )
        )
        if done == -1:
            raise StoreFull(_full(self.bound))
        return bool(done == 1)


async def _reached(command: Awaitable[T]) -> T:
    try:
        return await command
    except RedisError as exc:
        # the class only: redis' own text names internal hosts and ports, and this
        # message may reach a client (a trace lookup's 503)
        raise StoreUnavailable(f"Redis cannot be reached ({type(exc).__name__})") from None


def _as_bytes(value: bytes | str) -> bytes:
    return value.encode() if isinstance(value, str) else value


def _check_size(bound: Bound, value: bytes) -> None:
    if len(value) > bound.max_value_bytes:
        raise StoreFull(
            f"a {bound.name} value of {len(value)} bytes is over its bound of "
            f"{bound.max_value_bytes}"
        )


def _full(bound: Bound) -> str:
    return f"{bound.max_items} {bound.name} entries kept, none expired yet"


def open_key_value(redis: Redis | None, bound: Bound) -> KeyValue:
    """Redis when there is one, else an in-process store; either within ``bound``."""
    return RedisKeyValue(redis, bound) if redis is not None else MemoryKeyValue(bound)
