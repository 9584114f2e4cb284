"""One suite over both learned-state backends, the in-process map and a real Redis: counts
add up per tenant and never across, the bounds hold, a reset forgets one tenant."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable

import pytest
from redis.asyncio import Redis

from proxy.errors import StoreUnavailable
from proxy.learning.store import LearnedStore, MemoryLearnedStore, RedisLearnedStore
from tests.conftest import free_port

Open = Callable[..., LearnedStore]  # (max_entries=..., max_tenants=...) -> a store


@pytest.fixture(params=["memory", "redis"])
async def opened(request: pytest.FixtureRequest) -> AsyncIterator[Open]:
    client = None
    if request.param == "redis":
        client = Redis.from_url(request.getfixturevalue("redis_server"))
        await client.flushdb()  # the tenant bound counts every tenant of the server

    def open_store(max_entries: int = 100, max_tenants: int = 100) -> LearnedStore:
        if client is None:
            return MemoryLearnedStore(max_entries, max_tenants)
        return RedisLearnedStore(client, max_entries, max_tenants)

    yield open_store
    if client is not None:
        await client.flushdb()
        await client.aclose()


def tenant() -> str:
    return uuid.uuid4().hex


async def test_counts_add_up_per_key(opened: Open) -> None:
    store, who = opened(), tenant()
    assert await store.counts(who) == {}
    await store.add(who, {("edge", "a", "b"): (1, 0), ("pick", "a", "c"): (1, 0)})
    await store.add(who, {("edge", "a", "b"): (2, 1), ("select", "t", ""): (0, 1)})
    assert await store.counts(who) == {
        ("edge", "a", "b"): (3, 1),
        ("pick", "a", "c"): (1, 0),
        ("select", "t", ""): (0, 1),
    }


async def test_one_tenants_counts_never_reach_another(opened: Open) -> None:
    store, first, second = opened(), tenant(), tenant()
    await store.add(first, {("edge", "a", "b"): (5, 0)})
    await store.add(second, {("edge", "a", "c"): (1, 0)})
    assert await store.counts(first) == {("edge", "a", "b"): (5, 0)}
    assert await store.counts(second) == {("edge", "a", "c"): (1, 0)}


async def test_a_tenant_keeps_its_latest_updated_counts_within_the_bound(opened: Open) -> None:
    store, who = opened(max_entries=3), tenant()
    for target in "bcde":
        await store.add(who, {("edge", "a", target): (1, 0)})
    await store.add(who, {("edge", "a", "c"): (1, 0)})  # c is now the latest updated
    await store.add(who, {("edge", "a", "f"): (1, 0)})
    assert await store.counts(who) == {
        ("edge", "a", "e"): (1, 0),
        ("edge", "a", "c"): (2, 0),
        ("edge", "a", "f"): (1, 0),
    }


async def test_past_the_tenant_bound_the_one_updated_longest_ago_goes(opened: Open) -> None:
    store = opened(max_tenants=2)
    first, second, third = tenant(), tenant(), tenant()
    for who in (first, second):
        await store.add(who, {("edge", "a", "b"): (1, 0)})
    await store.add(first, {("edge", "a", "c"): (1, 0)})
    await store.add(third, {("edge", "a", "b"): (1, 0)})
    assert await store.counts(second) == {}
    assert len(await store.counts(first)) == 2
    assert await store.tenants() == [third, first]


async def test_a_reset_forgets_one_tenant_only(opened: Open) -> None:
    store, first, second = opened(), tenant(), tenant()
    await store.add(first, {("edge", "a", "b"): (1, 0), ("edge", "b", "c"): (0, 2)})
    await store.add(second, {("edge", "a", "b"): (1, 0)})
    assert await store.reset(first) == 2
    assert await store.counts(first) == {}
    assert await store.tenants() == [second]
    assert await store.reset(first) == 0
    await store.add(first, {("edge", "a", "b"): (1, 0)})
    assert await store.counts(first) == {("edge", "a", "b"): (1, 0)}


async def test_a_name_holding_the_separator_is_kept_whole(opened: Open) -> None:
    store, who = opened(), tenant()
    await store.add(who, {("select", "odd\x1fname", ""): (1, 0)})
    assert await store.counts(who) == {("select", "odd name", ""): (1, 0)}


async def test_a_redis_that_cannot_be_reached_is_a_store_error() -> None:
    client = Redis.from_url(f"redis://127.0.0.1:{free_port()}/0")
    store = RedisLearnedStore(client, 10, 10)
    with pytest.raises(StoreUnavailable):
        await store.add(tenant(), {("edge", "a", "b"): (1, 0)})
    with pytest.raises(StoreUnavailable):
        await store.counts(tenant())
    await client.aclose()


async def test_a_served_query_keeps_its_text_whole(opened: Open) -> None:
    store, who = opened(), tenant()
    text = "where is my parcel? (order 12, ünïcode) \x1f and a separator"
    await store.add(who, {("served", "track", text): (1, 0), ("served", "rate", text): (0, 1)})
    await store.add(who, {("served", "track", text): (2, 0)})
    kept = text.replace("\x1f", " ")
    assert await store.counts(who) == {
        ("served", "track", kept): (3, 0),
        ("served", "rate", kept): (0, 1),
    }
