"""Catalog notices through a real Redis: heard by the other process, not by the
sender, and after a lost subscription the catalog is marked stale once it is back."""

from __future__ import annotations

import asyncio
import contextlib

from redis.asyncio import Redis

from proxy.orchestrate.notices import CHANNEL, CatalogNotices


class Marks:
    """How often a process's catalog was marked stale, awaited by count."""

    def __init__(self) -> None:
        self.count = 0
        self._changed = asyncio.Condition()

    def __call__(self) -> None:
        self.count += 1
        asyncio.get_running_loop().create_task(self._notify())

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def reach(self, count: int) -> None:
        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(lambda: self.count >= count), 30)


async def subscribed(redis: Redis) -> None:
    """Wait until both listeners' subscriptions are in place (Redis tells no one when
    another connection subscribes, so this asks)."""
    async with asyncio.timeout(30):
        while dict(await redis.pubsub_numsub(CHANNEL)).get(CHANNEL.encode(), 0) < 2:  # noqa: ASYNC110
            await asyncio.sleep(0.05)


async def test_notices_reach_the_others_and_survive_a_lost_subscription(
    redis_server: str,
) -> None:
    writer_redis, reader_redis = Redis.from_url(redis_server), Redis.from_url(redis_server)
    writer_marks, reader_marks = Marks(), Marks()
    writer = CatalogNotices(writer_redis, writer_marks)
    reader = CatalogNotices(reader_redis, reader_marks)
    listeners = [asyncio.create_task(n.listen()) for n in (writer, reader)]
    try:
        await subscribed(writer_redis)
        await writer.announce()
        await reader_marks.reach(1)
        assert writer_marks.count == 1  # its own write, not its own notice too

        await writer_redis.client_kill_filter(_type="pubsub")  # both subscriptions drop
        await reader_marks.reach(2)  # marked once it is subscribed again
        await subscribed(writer_redis)
        await writer_marks.reach(2)  # the writer may have missed notices too
        await writer.announce()
        await reader_marks.reach(3)
    finally:
        for listener in listeners:
            listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await listener
        await writer_redis.aclose()
        await reader_redis.aclose()
