"""One suite over both KeyValue backends: the in-process map and a real Redis."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis

from proxy.errors import StoreFull, StoreUnavailable
from proxy.kv import KeyValue, MemoryKeyValue, RedisKeyValue
from tests.conftest import free_port


@pytest.fixture(params=["memory", "redis"])
async def store(request: pytest.FixtureRequest) -> AsyncIterator[KeyValue]:
    if request.param == "memory":
        yield MemoryKeyValue(100)
        return
    client = Redis.from_url(request.getfixturevalue("redis_server"))
    yield RedisKeyValue(client)
    await client.aclose()


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


# --- each backend's own bounds and failures -----------------------------------------


async def test_an_evicting_memory_store_forgets_the_oldest_write() -> None:
    store = MemoryKeyValue(2)
    for name in ("a", "b", "c"):
        await store.put(name, name.encode(), 60)
    assert await store.get("a") is None
    assert await store.get("c") == b"c"


async def test_a_non_evicting_memory_store_refuses_new_keys_but_keeps_old_ones() -> None:
    store = MemoryKeyValue(2, evict=False)
    assert await store.add("a", b"a", 60)
    assert await store.add("b", b"b", 60)
    with pytest.raises(StoreFull):
        await store.add("c", b"c", 60)
    await store.put("a", b"a2", 60)  # a key it holds may still change
    assert (await store.get("a"), await store.get("b")) == (b"a2", b"b")


async def test_a_full_non_evicting_store_makes_room_as_entries_expire() -> None:
    store = MemoryKeyValue(1, evict=False)
    await store.put("old", b"x", 0)  # expired as soon as written
    assert await store.add("new", b"y", 60)
    assert len(store) == 1


async def test_an_unreachable_redis_is_store_unavailable_on_every_operation() -> None:
    client = Redis.from_url(f"redis://127.0.0.1:{free_port()}/0")  # nothing listens
    store = RedisKeyValue(client)
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
        await RedisKeyValue(client).get("k")
    assert str(port) not in raised.value.message
    assert "127.0.0.1" not in raised.value.message
    await client.aclose()
