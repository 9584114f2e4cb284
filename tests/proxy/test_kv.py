"""One suite over both KeyValue backends, the in-process map and a real Redis: the
values, the TTLs and the bounds of a use (entries, value size, bytes in all and per
tenant) alike."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable

import pytest
from redis.asyncio import Redis

from proxy.errors import StoreFull, StoreUnavailable, TenantStoreFull
from proxy.kv import Bound, KeyValue, MemoryKeyValue, RedisKeyValue, entry_bytes
from tests.conftest import free_port

Open = Callable[..., KeyValue]  # (max_items, evict=..., max_value_bytes=..., ...) -> a store


@pytest.fixture(params=["memory", "redis"])
async def bounded(request: pytest.FixtureRequest) -> AsyncIterator[Open]:
    """Opens stores of one backend, each a use of its own (a fresh name)."""
    client = None
    if request.param == "redis":
        client = Redis.from_url(request.getfixturevalue("redis_server"))

    def open_store(
        max_items: int,
        *,
        evict: bool = True,
        max_value_bytes: int = 4096,
        max_bytes: int | None = None,
        tenant_bytes: int | None = None,
    ) -> KeyValue:
        name = f"test-{uuid.uuid4().hex}"
        bound = Bound(name, max_items, max_value_bytes, evict, max_bytes, tenant_bytes)
        return MemoryKeyValue(bound) if client is None else RedisKeyValue(client, bound)

    yield open_store
    if client is not None:
        await client.aclose()


@pytest.fixture
def store(bounded: Open) -> KeyValue:
    return bounded(100)


def key() -> str:
    return f"test:{uuid.uuid4().hex}"  # the Redis is shared by the whole session


async def test_a_value_put_is_read_back_and_replaced(store: KeyValue) -> None:
    k = key()
    assert await store.get(k) is None
    await store.put(k, b"one", 60)
    assert await store.get(k) == b"one"
    await store.put(k, b"two", 60)
    assert await store.get(k) == b"two"


async def test_add_stores_only_into_an_empty_key(store: KeyValue) -> None:
    k = key()
    assert await store.add(k, b"first", 60) is True
    assert await store.add(k, b"second", 60) is False
    assert await store.get(k) == b"first"
    await store.delete(k)
    assert await store.get(k) is None
    assert await store.add(k, b"third", 60) is True


async def test_an_entry_is_gone_after_its_ttl_and_its_key_free_again(store: KeyValue) -> None:
    k = key()
    await store.put(k, b"short", 1)
    for _ in range(100):  # Redis expires on its own clock: wait for it, never assume
        if await store.get(k) is None:
            break
        await asyncio.sleep(0.05)
    assert await store.get(k) is None
    assert await store.add(k, b"again", 60) is True


async def test_values_are_bytes_exactly(store: KeyValue) -> None:
    k = key()
    value = bytes(range(256))
    await store.put(k, value, 60)
    assert await store.get(k) == value


async def test_deleting_a_missing_key_is_no_error(store: KeyValue) -> None:
    await store.delete(key())


# --- the bounds of a use --------------------------------------------------------------


async def test_an_evicting_store_forgets_the_oldest_write(bounded: Open) -> None:
    store = bounded(2)
    a, b, c = key(), key(), key()
    for name in (a, b, c):
        await store.put(name, name.encode(), 60)
    assert await store.get(a) is None
    assert await store.get(c) == c.encode()


async def test_rewriting_a_key_makes_it_the_newest(bounded: Open) -> None:
    store = bounded(2)
    a, b, c = key(), key(), key()
    await store.put(a, b"1", 60)
    await store.put(b, b"1", 60)
    await store.put(a, b"2", 60)  # a key it holds: no room made, and now the newest
    await store.put(c, b"1", 60)
    assert (await store.get(a), await store.get(b), await store.get(c)) == (b"2", None, b"1")


async def test_a_non_evicting_store_refuses_new_keys_but_keeps_old_ones(bounded: Open) -> None:
    store = bounded(2, evict=False)
    a, b, c = key(), key(), key()
    assert await store.add(a, b"a", 60)
    assert await store.add(b, b"b", 60)
    with pytest.raises(StoreFull):
        await store.add(c, b"c", 60)
    with pytest.raises(StoreFull):
        await store.put(c, b"c", 60)
    await store.put(a, b"a2", 60)  # a key it holds may still change
    assert (await store.get(a), await store.get(b)) == (b"a2", b"b")
    await store.delete(b)  # a deleted key frees its place
    assert await store.add(c, b"c", 60)


async def test_a_full_non_evicting_store_makes_room_as_entries_expire(bounded: Open) -> None:
    store = bounded(1, evict=False)
    old = key()
    await store.put(old, b"x", 1)
    for _ in range(100):  # Redis expires on its own clock: wait for it, never assume
        if await store.get(old) is None:
            break
        await asyncio.sleep(0.05)
    assert await store.add(key(), b"y", 60)


async def test_uses_are_bounded_apart(bounded: Open) -> None:
    kept, busy = bounded(1), bounded(1)
    k = key()
    await kept.put(k, b"kept", 60)
    for _ in range(3):
        await busy.put(key(), b"other", 60)
    assert await kept.get(k) == b"kept"


async def test_a_value_over_its_bound_is_refused_and_nothing_is_stored(bounded: Open) -> None:
    store = bounded(10, max_value_bytes=4)
    k = key()
    await store.put(k, b"four", 60)
    with pytest.raises(StoreFull) as raised:
        await store.put(k, b"fives", 60)
    assert "5 bytes" in raised.value.message
    with pytest.raises(StoreFull):
        await store.add(key(), b"fives", 60)
    assert await store.get(k) == b"four"


# --- each backend's own quirks and failures -------------------------------------------


async def test_a_memory_entry_with_no_ttl_left_makes_room_at_once() -> None:
    store = MemoryKeyValue(Bound("test", 1, 1024, evict=False))
    await store.put("old", b"x", 0)  # expired as soon as written
    assert await store.add("new", b"y", 60)
    assert len(store) == 1


async def test_an_unreachable_redis_is_store_unavailable_on_every_operation() -> None:
    client = Redis.from_url(f"redis://127.0.0.1:{free_port()}/0")  # nothing listens
    store = RedisKeyValue(client, Bound("test", 10, 1024))
    for operation in (
        store.get("k"),
        store.put("k", b"v", 60),
        store.add("k", b"v", 60),
        store.delete("k"),
    ):
        with pytest.raises(StoreUnavailable):
            await operation
    await client.aclose()


async def test_store_unavailable_does_not_name_the_redis_address() -> None:
    port = free_port()
    client = Redis.from_url(f"redis://127.0.0.1:{port}/0")
    with pytest.raises(StoreUnavailable) as raised:
        await RedisKeyValue(client, Bound("test", 10, 1024)).get("k")
    assert str(port) not in raised.value.message
    assert "127.0.0.1" not in raised.value.message
    await client.aclose()


async def test_newest_lists_live_entries_latest_write_first(bounded: Open) -> None:
    store = bounded(10)
    keys = [key() for _ in range(4)]
    for k in keys:
        await store.put(k, k.encode(), 60)
    await store.put(keys[1], b"rewritten", 60)
    await store.put(keys[2], b"short-lived", 1)
    await store.delete(keys[3])
    assert await store.newest(2) == [(keys[2], b"short-lived"), (keys[1], b"rewritten")]
    for _ in range(100):  # Redis expires on its own clock: wait for it, never assume
        if await store.get(keys[2]) is None:
            break
        await asyncio.sleep(0.05)
    # the expired entry and the deleted one are not listed; a small limit pages past them
    assert await store.newest(1) == [(keys[1], b"rewritten")]
    assert await store.newest(10) == [(keys[1], b"rewritten"), (keys[0], keys[0].encode())]


async def test_newest_lists_only_its_own_use(bounded: Open) -> None:
    one, other = bounded(10), bounded(10)
    k = key()
    await one.put(k, b"mine", 60)
    await other.put(key(), b"theirs", 60)
    assert await one.newest(5) == [(k, b"mine")]


# --- bytes, in all and per tenant ----------------------------------------------------


def sized(name: str, size: int) -> bytes:
    """A value that makes the entry ``name`` cost exactly ``size`` bytes."""
    value = b"v" * (size - entry_bytes(name, b""))
    assert entry_bytes(name, value) == size
    return value


async def test_a_tenant_over_its_bytes_loses_its_own_oldest_entries_only(bounded: Open) -> None:
    store = bounded(100, tenant_bytes=3000)
    theirs = key()
    await store.put(theirs, sized(theirs, 1000), 60, tenant="b")
    busy = [key() for _ in range(5)]
    for name in busy:
        await store.put(name, sized(name, 1000), 60, tenant="a")
    assert [await store.get(name) is not None for name in busy] == [False] * 2 + [True] * 3
    assert await store.get(theirs) is not None


async def test_rewriting_an_entry_charges_its_tenant_the_difference(bounded: Open) -> None:
    store = bounded(100, tenant_bytes=3000)
    old, grown = key(), key()
    await store.put(old, sized(old, 1000), 60, tenant="a")
    await store.put(grown, sized(grown, 1000), 60, tenant="a")
    await store.put(grown, sized(grown, 2000), 60, tenant="a")  # 3000 in all: room still
    assert await store.get(old) is not None
    await store.put(grown, sized(grown, 2500), 60, tenant="a")
    assert await store.get(old) is None
    assert await store.get(grown) == sized(grown, 2500)


async def test_the_bytes_of_all_tenants_together_are_bounded(bounded: Open) -> None:
    store = bounded(100, max_bytes=2500)
    first, second, third = key(), key(), key()
    await store.put(first, sized(first, 1000), 60, tenant="a")
    await store.put(second, sized(second, 1000), 60, tenant="b")
    await store.put(third, sized(third, 1000), 60, tenant="c")
    assert await store.get(first) is None
    assert await store.get(second) is not None
    assert await store.get(third) is not None


async def test_a_non_evicting_store_refuses_a_full_tenant_and_no_other(bounded: Open) -> None:
    store = bounded(100, evict=False, tenant_bytes=2000)
    a, b = key(), key()
    assert await store.add(a, sized(a, 1000), 60, tenant="a")
    assert await store.add(key(), b"x", 60, tenant="a")
    with pytest.raises(TenantStoreFull) as raised:
        await store.add(key(), sized(a, 1000), 60, tenant="a")
    assert "one tenant" in raised.value.message
    assert await store.add(b, sized(b, 1000), 60, tenant="b")
    await store.put(a, sized(a, 1200), 60, tenant="a")  # a key it holds may still change
    assert await store.get(a) == sized(a, 1200)
    await store.delete(a)  # a deleted key gives its bytes back
    assert await store.add(key(), sized(a, 1000), 60, tenant="a")


async def test_a_non_evicting_store_refuses_past_the_bytes_of_all(bounded: Open) -> None:
    store = bounded(100, evict=False, max_bytes=2000)
    assert await store.add(key(), b"x" * 900, 60, tenant="a")
    assert await store.add(key(), b"x" * 500, 60, tenant="b")
    with pytest.raises(StoreFull) as raised:
        await store.add(key(), b"x" * 900, 60, tenant="c")
    assert not isinstance(raised.value, TenantStoreFull)


async def test_an_expired_entry_gives_its_tenant_its_bytes_back(bounded: Open) -> None:
    store = bounded(100, evict=False, tenant_bytes=1500)
    old = key()
    await store.put(old, sized(old, 1000), 1, tenant="a")
    for _ in range(100):  # Redis expires on its own clock: wait for it, never assume
        if await store.get(old) is None:
            break
        await asyncio.sleep(0.05)
    new = key()
    assert await store.add(new, sized(new, 1000), 60, tenant="a")


async def test_a_value_larger_than_a_tenants_bytes_is_refused(bounded: Open) -> None:
    store = bounded(100, tenant_bytes=2000)
    name = key()
    with pytest.raises(StoreFull):
        await store.put(name, sized(name, 2001), 60, tenant="a")
    assert await store.get(name) is None
