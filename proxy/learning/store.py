"""Where each tenant's learned counts live: Redis when configured, else in process.

Both backends keep one contract (``tests/learning/test_store.py`` runs one suite over
both): :meth:`~LearnedStore.add` adds to a tenant's counts and never to another's; a
tenant holds at most ``max_entries`` counts, past which the least recently updated go;
at most ``max_tenants`` tenants are kept, past which the one updated longest ago is
dropped whole; :meth:`~LearnedStore.reset` forgets one tenant. Redis' errors become
:class:`~proxy.errors.StoreUnavailable` here, where they enter.

In Redis a tenant is one hash (``toolgraph:learned:<tenant>``, a count per field as
``"good bad"``) and a sorted set beside it of its fields in order of update; a sorted
set of tenants in order of update bounds their number. One Lua script per write keeps
them in step, so every worker and replica shares the bounds (one Redis server or a
Sentinel's primary, as :mod:`proxy.kv`).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Mapping
from typing import Protocol, TypeVar, cast

from redis.asyncio import Redis
from redis.exceptions import RedisError

from proxy.errors import StoreUnavailable
from proxy.kv import PREFIX
from proxy.learning.feedback import KINDS, Count, Key

T = TypeVar("T")
_SEP = "\x1f"
_NAMESPACE = f"{PREFIX}learned:"


class LearnedStore(Protocol):
    async def add(self, tenant: str, counts: Mapping[Key, Count]) -> None:
        """Add ``counts`` to ``tenant``'s, within the bounds."""
        ...

    async def counts(self, tenant: str) -> dict[Key, Count]:
        """Everything ``tenant`` learned (empty for a tenant never seen)."""
        ...

    async def reset(self, tenant: str) -> int:
        """Forget ``tenant``'s counts; how many there were."""
        ...

    async def tenants(self) -> list[str]:
        """The tenants with learned counts, the latest updated first."""
        ...


class MemoryLearnedStore:
    """In process, within the bounds."""

    def __init__(self, max_entries: int, max_tenants: int) -> None:
        self.max_entries = max_entries
        self.max_tenants = max_tenants
        self._tenants: OrderedDict[str, OrderedDict[Key, Count]] = OrderedDict()

    async def add(self, tenant: str, counts: Mapping[Key, Count]) -> None:
        if not counts:
            return
        held = self._tenants.pop(tenant, None) or OrderedDict()
        self._tenants[tenant] = held
        for key, (good, bad) in counts.items():
            key = _clean(key)
            was = held.pop(key, (0, 0))
            held[key] = (was[0] + good, was[1] + bad)
        while len(held) > self.max_entries:
            held.popitem(last=False)
        while len(self._tenants) > self.max_tenants:
            self._tenants.popitem(last=False)

    async def counts(self, tenant: str) -> dict[Key, Count]:
        return dict(self._tenants.get(tenant, {}))

    async def reset(self, tenant: str) -> int:
        return len(self._tenants.pop(tenant, {}))

    async def tenants(self) -> list[str]:
        return list(reversed(self._tenants))


#: One write: KEYS = the tenant's hash, its order of fields, the order of tenants, the
#: write counter (that order, no clock involved); ARGV = max_entries, max_tenants, the
#: tenant, the namespace, then (field, good, bad) per count.
_ADD = """
local counts, order, tenants, clock = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local most, most_tenants = tonumber(ARGV[1]), tonumber(ARGV[2])
local tenant, namespace = ARGV[3], ARGV[4]
for i = 5, #ARGV, 3 do
  local field = ARGV[i]
  local good, bad = 0, 0
  local held = redis.call('HGET', counts, field)
  if held then
    local g, b = string.match(held, '^(%d+) (%d+)$')
    good, bad = tonumber(g), tonumber(b)
  end
  good = good + tonumber(ARGV[i + 1])
  bad = bad + tonumber(ARGV[i + 2])
  redis.call('HSET', counts, field, string.format('%d %d', good, bad))
  redis.call('ZADD', order, redis.call('INCR', clock), field)
end
local over = redis.call('ZCARD', order) - most
if over > 0 then
  local gone = redis.call('ZPOPMIN', order, over)
  for i = 1, #gone, 2 do redis.call('HDEL', counts, gone[i]) end
end
redis.call('ZADD', tenants, redis.call('INCR', clock), tenant)
over = redis.call('ZCARD', tenants) - most_tenants
if over > 0 then
  local gone = redis.call('ZPOPMIN', tenants, over)
  for i = 1, #gone, 2 do
    redis.call('DEL', namespace .. gone[i], namespace .. gone[i] .. ':order')
  end
end
return 1
"""


class RedisLearnedStore:
    """In Redis, within the bounds (counted across every process sharing the server)."""

    def __init__(self, redis: Redis, max_entries: int, max_tenants: int) -> None:
        self._redis = redis
        self.max_entries = max_entries
        self.max_tenants = max_tenants
        self._tenants = f"{_NAMESPACE}~tenants"
        self._add = redis.register_script(_ADD)

    async def add(self, tenant: str, counts: Mapping[Key, Count]) -> None:
        if not counts:
            return
        args: list[str | int] = [self.max_entries, self.max_tenants, tenant, _NAMESPACE]
        for key, (good, bad) in counts.items():
            args += [_field(_clean(key)), good, bad]
        hash_key = _NAMESPACE + tenant
        keys = [hash_key, hash_key + ":order", self._tenants, self._tenants + ":clock"]
        await reached(self._add(keys=keys, args=args))

    async def counts(self, tenant: str) -> dict[Key, Count]:
        raw = cast(dict[bytes, bytes], await reached(self._redis.hgetall(_NAMESPACE + tenant)))
        found: dict[Key, Count] = {}
        for field, value in raw.items():
            key = _key(_text(field))
            good, _, bad = _text(value).partition(" ")
            if key is not None:
                found[key] = (int(good), int(bad))
        return found

    async def reset(self, tenant: str) -> int:
        hash_key = _NAMESPACE + tenant
        async with self._redis.pipeline(transaction=True) as all_of:
            all_of.hlen(hash_key)
            all_of.delete(hash_key, hash_key + ":order")
            all_of.zrem(self._tenants, tenant)
            held, *_ = await reached(all_of.execute())
        return int(held)

    async def tenants(self) -> list[str]:
        members = await reached(self._redis.zrevrange(self._tenants, 0, -1))
        return [_text(member) for member in members if isinstance(member, bytes | str)]


def open_learned_store(redis: Redis | None, max_entries: int, max_tenants: int) -> LearnedStore:
    """Redis when there is one, else an in-process store; either within the bounds."""
    if redis is not None:
        return RedisLearnedStore(redis, max_entries, max_tenants)
    return MemoryLearnedStore(max_entries, max_tenants)


async def reached(command: Awaitable[T]) -> T:
    try:
        return await command
    except RedisError as exc:  # the class only: redis' text names internal hosts
        raise StoreUnavailable(f"Redis cannot be reached ({type(exc).__name__})") from None


def _clean(key: Key) -> Key:
    """The key with the separator out of its names (a client's tool name may hold it)."""
    kind, a, b = key
    return (kind, a.replace(_SEP, " "), b.replace(_SEP, " "))


def _field(key: Key) -> str:
    return _SEP.join(key)


def _key(field: str) -> Key | None:
    parts = field.split(_SEP)
    if len(parts) != 3 or parts[0] not in KINDS:
        return None
    return (parts[0], parts[1], parts[2])


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
