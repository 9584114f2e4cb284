"""Small records kept for a while: traces, idempotency keys, conversation results,
the field lists of tool responses.

Redis when configured (shared by every worker and replica), else an in-process
map. Values are bytes; callers encode. Each use opens a store of its own with its
own :class:`Bound` (a name, how many entries, how large one value, how many bytes in
all and per tenant) and passes its own TTL with every write, so one kind of record
never pushes out another (``newest`` lists a use's latest entries: the console's list
of traces). Each write names its tenant (:mod:`proxy.tenancy`), so a use bounded per
tenant keeps one client from taking another's room:

* traces: ``orchestrate.max_traces`` entries and ``orchestrate.max_trace_bytes``, a
  tenant's ``orchestrate.tenant_trace_bytes``, the oldest goes; ``TRACE_BYTES``
  (``proxy/orchestrate/records.py``); ``orchestrate.trace_ttl``;
* turn results: ``orchestrate.max_conversations`` and
  ``orchestrate.max_conversation_bytes``, a tenant's
  ``orchestrate.tenant_conversation_bytes``, the oldest goes; ``RESULT_BYTES``;
  ``orchestrate.conversation_ttl``;
* idempotency keys: ``orchestrate.max_idempotency_keys`` and
  ``orchestrate.max_idempotency_bytes``, a tenant's
  ``orchestrate.tenant_idempotency_bytes``, a new key refused while they are held;
  ``ANSWER_BYTES``; ``orchestrate.idempotency_ttl``;
* stored responses (``/v1/responses``): ``responses.max_stored`` and
  ``responses.max_total_bytes``, a tenant's ``responses.tenant_bytes``, the oldest
  goes; ``responses.max_stored_bytes``; ``responses.store_ttl``
  (``proxy/responses_api/store.py``);
* select mode's loaded tools: 10,000 conversations and
  ``retriever.select_loaded_max_bytes``, a tenant's
  ``retriever.select_loaded_tenant_bytes``, the oldest goes; ``MAX_LOADED_BYTES``
  (``proxy/select/loaded.py``); ``retriever.select_loaded_ttl_s``;
* field lists: ``FIELD_LISTS`` (``proxy/execute/service.py``), the oldest goes;
  7 days, 10 minutes for "no list" (``proxy/execute/fields.py``).

The contract both backends keep (``tests/proxy/test_kv.py`` runs one suite over
both): an entry lives until its TTL; ``add`` stores only into an empty key; a use
holds at most ``max_items`` live entries and ``max_bytes`` (an entry costs its key,
its value and :data:`ENTRY_BYTES`: :func:`entry_bytes`), and one tenant's entries at
most ``tenant_bytes``; past a bound the least recently written entries go, the
tenant's own first (``evict=True``: caches, traces), or a new key is refused
(``evict=False``: a store of promises, idempotency keys, refuses new ones rather than
break old ones, and a key it holds may always change: a tenant's share is at most
overrun by the answers of its keys still running); no value is larger than
``max_value_bytes``; and failures are toolgraph's own errors:

* :class:`~proxy.errors.StoreUnavailable` when Redis cannot be reached (its
  ``RedisError`` is translated here, where it enters);
* :class:`~proxy.errors.StoreFull` for a value over a bound, or a write refused by
  a full ``evict=False`` store; :class:`~proxy.errors.TenantStoreFull` when it is
  the tenant's own share that is full.

In Redis a use's entries are counted in a sorted set beside them
(``toolgraph:~NAME``: its keys in order of writing), one per tenant
(``toolgraph:~NAME:t:TENANT``) and hashes of each entry's cost and tenant, that one
Lua script per write or delete keeps in step, so every worker and replica shares the
one bound. In both backends an entry that expired leaves the count when room is made,
from the oldest write on (the use's and its tenant's).
The script deletes the entries it evicts by name, which one Redis server (or a
Sentinel's primary) allows; Redis Cluster would want a use's keys in one hash slot.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from redis.asyncio import Redis
from redis.exceptions import RedisError

from proxy.errors import StoreFull, StoreUnavailable, TenantStoreFull

PREFIX = "toolgraph:"
T = TypeVar("T")

#: What an entry costs besides its key and value: Redis' own bookkeeping of a key, about,
#: and ours. It makes a bound in bytes a bound in entries too (of tiny values).
ENTRY_BYTES = 200


def entry_bytes(key: str, value: bytes) -> int:
    """What the entry ``key`` holding ``value`` counts against a use's bytes."""
    return len(key.encode()) + len(value) + ENTRY_BYTES


@dataclass(frozen=True, slots=True)
class Bound:
    """How much one use of the store may hold."""

    name: str  # the use, unique per app (Redis counts its entries under it)
    max_items: int  # live entries
    max_value_bytes: int  # one value
    evict: bool = True  # full: drop the oldest write (True) or refuse a new key (False)
    max_bytes: int | None = None  # every entry together (entry_bytes); None: unbounded
    tenant_bytes: int | None = None  # one tenant's entries together; None: unbounded


class KeyValue(Protocol):
    async def get(self, key: str) -> bytes | None: ...

    async def put(self, key: str, value: bytes, ttl: int, *, tenant: str = "") -> None:
        """Store ``value``, counted against ``tenant``'s bytes."""
        ...

    async def add(self, key: str, value: bytes, ttl: int, *, tenant: str = "") -> bool:
        """Store ``value`` only if ``key`` holds nothing; whether it was stored."""
        ...

    async def delete(self, key: str) -> None: ...

    async def newest(self, limit: int, prefix: str = "") -> list[tuple[str, bytes]]:
        """Up to ``limit`` live entries (key, value) of this use whose keys start with
        ``prefix``, the latest written first."""
        ...


@dataclass(slots=True)
class _Entry:
    expires: float
    value: bytes
    tenant: str
    cost: int


@dataclass(slots=True)
class _Held:
    """One tenant's entries, oldest write first, and what they cost."""

    keys: OrderedDict[str, None] = field(default_factory=OrderedDict)
    cost: int = 0


class MemoryKeyValue:
    """In process, within ``bound``."""

    def __init__(self, bound: Bound) -> None:
        self.bound = bound
        self._items: OrderedDict[str, _Entry] = OrderedDict()
        self._tenants: dict[str, _Held] = {}
        self._cost = 0

    def __len__(self) -> int:
        return len(self._items)

    async def get(self, key: str) -> bytes | None:
        entry = self._items.get(key)
        if entry is None:
            return None
        if entry.expires <= time.monotonic():
            self._forget(key)
            return None
        return entry.value

    async def put(self, key: str, value: bytes, ttl: int, *, tenant: str = "") -> None:
        cost = _check_size(self.bound, key, value)
        self._sweep(tenant)
        held = self._held_by(key, tenant)
        if self.bound.evict:
            self._forget(key)
            self._make_room(tenant, cost)
        else:
            self._check_room(tenant, held, cost)
            self._forget(key)
        self._items[key] = _Entry(time.monotonic() + ttl, value, tenant, cost)
        owner = self._tenants.setdefault(tenant, _Held())
        owner.keys[key] = None
        owner.cost += cost
        self._cost += cost

    async def add(self, key: str, value: bytes, ttl: int, *, tenant: str = "") -> bool:
        if await self.get(key) is not None:
            return False
        await self.put(key, value, ttl, tenant=tenant)
        return True

    async def delete(self, key: str) -> None:
        self._forget(key)

    async def newest(self, limit: int, prefix: str = "") -> list[tuple[str, bytes]]:
        now = time.monotonic()
        found: list[tuple[str, bytes]] = []
        for key, entry in reversed(self._items.items()):
            if len(found) >= limit:
                break
            if entry.expires > now and key.startswith(prefix):
                found.append((key, entry.value))
        return found

    def _held_by(self, key: str, tenant: str) -> _Entry | None:
        """The live entry ``key`` of ``tenant``; another tenant's is forgotten (a rewrite
        charges its new tenant the whole of it)."""
        entry = self._items.get(key)
        if entry is not None and entry.tenant != tenant:
            self._forget(key)
            return None
        return entry

    def _sweep(self, tenant: str) -> None:
        """Expired entries go, from the oldest write on: the use's, and ``tenant``'s."""
        now = time.monotonic()
        while self._items and next(iter(self._items.values())).expires <= now:
            self._forget(next(iter(self._items)))
        owner = self._tenants.get(tenant)
        while owner is not None and owner.keys:
            oldest = next(iter(owner.keys))
            if self._items[oldest].expires > now:
                break
            self._forget(oldest)
            owner = self._tenants.get(tenant)

    def _make_room(self, tenant: str, cost: int) -> None:
        """Room for ``cost`` more bytes of ``tenant``'s: its own oldest go, then anyone's."""
        bound, owner = self.bound, self._tenants.get(tenant)
        while owner is not None and owner.keys and _over(bound.tenant_bytes, owner.cost + cost):
            self._forget(next(iter(owner.keys)))
            owner = self._tenants.get(tenant)
        while self._items and (
            len(self._items) >= bound.max_items or _over(bound.max_bytes, self._cost + cost)
        ):
            self._forget(next(iter(self._items)))

    def _check_room(self, tenant: str, held: _Entry | None, cost: int) -> None:
        """Refuse a new key in a full use, or in ``tenant``'s full share of it."""
        if held is not None:
            return
        if len(self._items) >= self.bound.max_items:
            raise StoreFull(_full(self.bound))
        owner = self._tenants.get(tenant)
        if _over(self.bound.tenant_bytes, (owner.cost if owner else 0) + cost):
            raise TenantStoreFull(_tenant_full(self.bound))
        if _over(self.bound.max_bytes, self._cost + cost):
            raise StoreFull(_bytes_full(self.bound))

    def _forget(self, key: str) -> None:
        entry = self._items.pop(key, None)
        if entry is None:
            return
        self._cost -= entry.cost
        owner = self._tenants[entry.tenant]
        del owner.keys[key]
        owner.cost -= entry.cost
        if not owner.keys:
            del self._tenants[entry.tenant]


def _over(bound: int | None, cost: int) -> bool:
    return bound is not None and cost > bound


#: Forgets a member's bookkeeping (not its entry): its place in the use's index and its
#: tenant's, its cost in both totals. Shared by the write and delete scripts below.
_FORGET = """
local function forget(index, member)
  local size = tonumber(redis.call('HGET', index .. ':size', member) or '0')
  local owner = redis.call('HGET', index .. ':owner', member)
  redis.call('ZREM', index, member)
  redis.call('HDEL', index .. ':size', member)
  redis.call('HDEL', index .. ':owner', member)
  redis.call('DECRBY', index .. ':bytes', size)
  if owner then
    redis.call('ZREM', index .. ':t:' .. owner, member)
    if redis.call('HINCRBY', index .. ':tbytes', owner, -size) <= 0 then
      redis.call('HDEL', index .. ':tbytes', owner)
    end
  end
end
local function sweep(index, zset, prefix)
  while true do
    local oldest = redis.call('ZRANGE', zset, 0, 0)[1]
    if not oldest or redis.call('EXISTS', prefix .. oldest) == 1 then return end
    forget(index, oldest)
  end
end
local function drop_oldest(index, zset, prefix)
  local oldest = redis.call('ZRANGE', zset, 0, 0)[1]
  if not oldest then return false end
  redis.call('DEL', prefix .. oldest)
  forget(index, oldest)
  return true
end
"""

#: One write of a bounded use, atomic: KEYS = the entry, the use's index (its keys in
#: order of writing; its bookkeeping is named after it), the use's write counter (that
#: order: no clock involved); ARGV = value, ttl, max_items, evict, only_if_empty, the
#: key as the index names it, the key prefix, tenant, cost, max_bytes, tenant_bytes (0:
#: unbounded). Returns 1 stored, 0 the key was taken (only_if_empty), -1 the use full,
#: -2 the tenant's share full (both for a new key, with evict off).
_WRITE = (
    _FORGET
    + """
local entry, index, clock = KEYS[1], KEYS[2], KEYS[3]
local value, ttl, most = ARGV[1], ARGV[2], tonumber(ARGV[3])
local evict, only_if_empty, member, prefix = ARGV[4] == '1', ARGV[5] == '1', ARGV[6], ARGV[7]
local tenant, cost = ARGV[8], tonumber(ARGV[9])
local max_bytes, tenant_bytes = tonumber(ARGV[10]), tonumber(ARGV[11])
local tindex = index .. ':t:' .. tenant
if only_if_empty and redis.call('EXISTS', entry) == 1 then return 0 end
sweep(index, index, prefix)
sweep(index, tindex, prefix)
if redis.call('ZSCORE', index, member) and (redis.call('EXISTS', entry) == 0
    or redis.call('HGET', index .. ':owner', member) ~= tenant) then
  forget(index, member)
end
local function total() return tonumber(redis.call('GET', index .. ':bytes') or '0') end
local function mine() return tonumber(redis.call('HGET', index .. ':tbytes', tenant) or '0') end
if evict then
  if redis.call('ZSCORE', index, member) then forget(index, member) end
  while tenant_bytes > 0 and mine() + cost > tenant_bytes do
    if not drop_oldest(index, tindex, prefix) then break end
  end
  while redis.call('ZCARD', index) >= most or (max_bytes > 0 and total() + cost > max_bytes) do
    if not drop_oldest(index, index, prefix) then break end
  end
elseif redis.call('ZSCORE', index, member) then
  forget(index, member)
else
  if redis.call('ZCARD', index) >= most then return -1 end
  if tenant_bytes > 0 and mine() + cost > tenant_bytes then return -2 end
  if max_bytes > 0 and total() + cost > max_bytes then return -1 end
end
local order = redis.call('INCR', clock)
redis.call('SET', entry, value, 'EX', ttl)
redis.call('ZADD', index, order, member)
redis.call('ZADD', tindex, order, member)
redis.call('HSET', index .. ':size', member, cost)
redis.call('HSET', index .. ':owner', member, tenant)
redis.call('INCRBY', index .. ':bytes', cost)
redis.call('HINCRBY', index .. ':tbytes', tenant, cost)
return 1
"""
)

#: One delete, atomic: KEYS = the entry, the use's index; ARGV = the key as the index
#: names it.
_DELETE = (
    _FORGET
    + """
redis.call('DEL', KEYS[1])
if redis.call('ZSCORE', KEYS[2], ARGV[1]) then forget(KEYS[2], ARGV[1]) end
return 1
"""
)


class RedisKeyValue:
    """In Redis, within ``bound`` (counted across every process sharing the server)."""

    def __init__(self, redis: Redis, bound: Bound) -> None:
        self._redis = redis
        self.bound = bound
        self._index = f"{PREFIX}~{bound.name}"
        self._write = redis.register_script(_WRITE)
        self._delete = redis.register_script(_DELETE)

    async def get(self, key: str) -> bytes | None:
        value = await _reached(self._redis.get(PREFIX + key))
        return value.encode() if isinstance(value, str) else value

    async def put(self, key: str, value: bytes, ttl: int, *, tenant: str = "") -> None:
        await self._store(key, value, ttl, tenant, only_if_empty=False)

    async def add(self, key: str, value: bytes, ttl: int, *, tenant: str = "") -> bool:
        return await self._store(key, value, ttl, tenant, only_if_empty=True)

    async def delete(self, key: str) -> None:
        await _reached(self._delete(keys=[PREFIX + key, self._index], args=[key]))

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

    async def _store(
        self, key: str, value: bytes, ttl: int, tenant: str, *, only_if_empty: bool
    ) -> bool:
        bound = self.bound
        cost = _check_size(bound, key, value)
        flags = [int(bound.evict), int(only_if_empty)]
        sizes = [cost, bound.max_bytes or 0, bound.tenant_bytes or 0]
        done = await _reached(
            self._write(
                keys=[PREFIX + key, self._index, self._index + ":clock"],
                args=[value, ttl, bound.max_items, *flags, key, PREFIX, tenant, *sizes],
            )
        )
        if done == -1:
            raise StoreFull(_full(bound) if bound.max_bytes is None else _bytes_full(bound))
        if done == -2:
            raise TenantStoreFull(_tenant_full(bound))
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


def _check_size(bound: Bound, key: str, value: bytes) -> int:
    """What the entry costs (:func:`entry_bytes`), or StoreFull when no bound could hold it."""
    if len(value) > bound.max_value_bytes:
        raise StoreFull(
            f"a {bound.name} value of {len(value)} bytes is over its bound of "
            f"{bound.max_value_bytes}"
        )
    cost = entry_bytes(key, value)
    for most in (bound.max_bytes, bound.tenant_bytes):
        if most is not None and cost > most:
            raise StoreFull(f"a {bound.name} entry of {cost} bytes is over its bound of {most}")
    return cost


def _full(bound: Bound) -> str:
    return f"{bound.max_items} {bound.name} entries kept, none expired yet"


def _bytes_full(bound: Bound) -> str:
    return (
        f"{bound.name} entries hold their bound of {bound.max_bytes} bytes (or "
        f"{bound.max_items} entries), none expired yet"
    )


def _tenant_full(bound: Bound) -> str:
    return f"one tenant's {bound.name} entries hold its bound of {bound.tenant_bytes} bytes"


def open_key_value(redis: Redis | None, bound: Bound) -> KeyValue:
    """Redis when there is one, else an in-process store; either within ``bound``."""
    return RedisKeyValue(redis, bound) if redis is not None else MemoryKeyValue(bound)
