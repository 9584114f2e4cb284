"""Virtual keys' stores and limits: one suite over both backends of each (in process or
on disk, and Redis)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from redis.asyncio import Redis

from proxy.errors import RateLimited
from proxy.tenancy.keys import (
    FileKeys,
    KeyLimits,
    KeySpec,
    KeyStore,
    RedisKeys,
    ToolScope,
    digest_of,
    issue,
)
from proxy.tenancy.limits import Limiter, MemoryLimiter, RedisLimiter


@pytest.fixture(params=["file", "redis"])
async def stores(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[KeyStore, KeyStore]]:
    """Two handles on one store (two workers, or a restart)."""
    if request.param == "file":
        yield FileKeys(tmp_path), FileKeys(tmp_path)
        return
    url = request.getfixturevalue("redis_server")
    first, second = Redis.from_url(url), Redis.from_url(url)
    await first.flushdb()
    yield RedisKeys(first), RedisKeys(second)
    await first.aclose()
    await second.aclose()


async def test_a_key_is_found_by_its_secret_alone_and_kept_without_it(
    stores: tuple[KeyStore, KeyStore], tmp_path: Path
) -> None:
    store, other = stores
    key, secret = issue(KeySpec(name="analytics", scope=ToolScope(packs=["course_assistant"])))
    await store.add(key)

    assert secret.startswith("tg-")
    assert len(secret) > 40
    assert await other.find(digest_of(secret)) == key  # seen by every handle at once
    assert await other.find(digest_of(secret + "x")) is None
    assert await other.find(digest_of(secret[:-1])) is None
    assert [k.id for k in await other.all()] == [key.id]
    assert "digest" not in key.public()
    assert secret not in str(key.public())
    if isinstance(store, FileKeys):
        assert secret not in (tmp_path / "virtual_keys.json").read_text()


async def test_a_revoked_key_is_found_no_more(stores: tuple[KeyStore, KeyStore]) -> None:
    store, other = stores
    kept, kept_secret = issue(KeySpec(name="kept"))
    gone, gone_secret = issue(KeySpec(name="gone"))
    await store.add(kept)
    await store.add(gone)

    assert await other.remove(gone.id) == gone
    assert await other.remove(gone.id) is None
    assert await store.find(digest_of(gone_secret)) is None
    assert await store.find(digest_of(kept_secret)) == kept
    assert [k.name for k in await store.all()] == ["kept"]


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture(params=["memory", "redis"])
async def limiter(request: pytest.FixtureRequest) -> AsyncIterator[tuple[Limiter, Clock]]:
    clock = Clock(60 * 16_667 + 20.0)  # 20 s into a minute
    if request.param == "memory":
        yield MemoryLimiter(clock), clock
        return
    redis = Redis.from_url(request.getfixturevalue("redis_server"))
    await redis.flushdb()
    yield RedisLimiter(redis, clock), clock
    await redis.aclose()


async def test_a_keys_rate_is_counted_per_minute(limiter: tuple[Limiter, Clock]) -> None:
    limits, clock = limiter
    key, _ = issue(KeySpec(name="slow", limits=KeyLimits(requests_per_minute=2)))
    other, _ = issue(KeySpec(name="other", limits=KeyLimits(requests_per_minute=2)))
    for _ in range(2):
        await (await limits.admit(key))()

    with pytest.raises(RateLimited) as refused:
        await limits.admit(key)
    assert refused.value.status == 429
    assert refused.value.headers == {"retry-after": "40"}  # the minute's end
    assert "RPM" in refused.value.message
    assert "'slow'" in refused.value.message
    await limits.admit(other)  # another key's count is its own
    clock.now += 40  # the next minute
    await limits.admit(key)


async def test_a_keys_requests_at_once_are_bounded_until_given_back(
    limiter: tuple[Limiter, Clock],
) -> None:
    limits, _ = limiter
    key, _ = issue(KeySpec(name="busy", limits=KeyLimits(max_concurrent=2)))
    first = await limits.admit(key)
    await limits.admit(key)

    with pytest.raises(RateLimited) as refused:
        await limits.admit(key)
    assert refused.value.headers == {"retry-after": "1"}
    await first()
    await limits.admit(key)
    with pytest.raises(RateLimited):
        await limits.admit(key)
