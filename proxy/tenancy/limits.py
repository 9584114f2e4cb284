"""A virtual key's limits: requests a minute and requests at once.

Past either, the request is refused before it does anything, with OpenAI's 429
(``type: requests``, ``code: rate_limit_exceeded``) and a ``retry-after`` in seconds:
the end of the minute for the rate, one second for concurrency (the SDK waits that long
and retries). The rate is counted per calendar minute. :class:`RedisLimiter` counts in
Redis, so every worker and replica shares a key's limits; :class:`MemoryLimiter` in the
process. Both pass one test suite (``tests/tenancy/test_limits.py``).
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

from redis.asyncio import Redis
from redis.exceptions import RedisError

from proxy.errors import RateLimited, StoreUnavailable
from proxy.tenancy.keys import VirtualKey

Release = Callable[[], Awaitable[None]]
Clock = Callable[[], float]
#: How long Redis keeps a running count nobody gave back (a process that died mid-request).
RUNNING_TTL = 3600
T = TypeVar("T")


class Limiter(Protocol):
    async def admit(self, key: VirtualKey) -> Release:
        """Count one request of ``key``, or raise :class:`RateLimited`; the release to
        await when the request has ended."""
        ...


def open_limiter(redis: Redis | None, clock: Clock = time.time) -> Limiter:
    return MemoryLimiter(clock) if redis is None else RedisLimiter(redis, clock)


async def _nothing() -> None:
    return None


def _too_fast(key: VirtualKey, now: float) -> RateLimited:
    limit = key.limits.requests_per_minute
    wait = max(1, math.ceil(60 - now % 60))
    return RateLimited(
        f"Rate limit reached for key {key.name!r} on requests per min (RPM): limit {limit}. "
        f"Please try again in {wait}s.",
        retry_after=wait,
    )


def _too_many(key: VirtualKey) -> RateLimited:
    return RateLimited(
        f"Rate limit reached for key {key.name!r} on requests at once: limit "
        f"{key.limits.max_concurrent}. Please try again in 1s.",
        retry_after=1,
    )


class MemoryLimiter:
    def __init__(self, clock: Clock = time.time) -> None:
        self._clock = clock
        self._minutes: dict[str, tuple[int, int]] = {}  # key id -> (minute, requests in it)
        self._running: Counter[str] = Counter()

    async def admit(self, key: VirtualKey) -> Release:
        limits, now = key.limits, self._clock()
        if limits.max_concurrent is not None and self._running[key.id] >= limits.max_concurrent:
            raise _too_many(key)
        if limits.requests_per_minute is not None:
            minute = int(now // 60)
            held_minute, count = self._minutes.get(key.id, (minute, 0))
            count = count if held_minute == minute else 0
            if count >= limits.requests_per_minute:
                raise _too_fast(key, now)
            self._minutes[key.id] = (minute, count + 1)
        if limits.max_concurrent is None:
            return _nothing
        self._running[key.id] += 1

        async def release() -> None:
            self._running[key.id] -= 1
            if self._running[key.id] <= 0:
                del self._running[key.id]

        return release


class RedisLimiter:
    def __init__(self, redis: Redis, clock: Clock = time.time) -> None:
        self._redis = redis
        self._clock = clock

    async def admit(self, key: VirtualKey) -> Release:
        limits, now = key.limits, self._clock()
        release: Release = _nothing
        if limits.max_concurrent is not None:
            release = await self._start(key, limits.max_concurrent)
        if limits.requests_per_minute is not None:
            try:
                await self._count(key, limits.requests_per_minute, now)
            except BaseException:
                await release()
                raise
        return release

    async def _start(self, key: VirtualKey, most: int) -> Release:
        name = f"toolgraph:running:{key.id}"
        running = await self._pipelined(name, RUNNING_TTL)
        if running > most:
            await _reached(self._redis.decr(name))
            raise _too_many(key)

        async def release() -> None:
            await _reached(self._redis.decr(name))

        return release

    async def _count(self, key: VirtualKey, most: int, now: float) -> None:
        name = f"toolgraph:rate:{key.id}:{int(now // 60)}"
        if await self._pipelined(name, 120) > most:
            raise _too_fast(key, now)

    async def _pipelined(self, name: str, ttl: int) -> int:
        """INCR ``name`` and (re)set its TTL, in one round trip; the new count."""
        async with self._redis.pipeline(transaction=True) as both:
            both.incr(name)
            both.expire(name, ttl)
            count, _ = await _reached(both.execute())
        return int(count)


async def _reached(command: Awaitable[T]) -> T:
    try:
        return await command
    except RedisError as exc:
        raise StoreUnavailable(f"Redis cannot be reached ({type(exc).__name__})") from None
