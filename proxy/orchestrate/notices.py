"""Notices through Redis that the tool catalog changed, between workers and replicas.

A notice only makes a re-sync sooner. The graph store's version stamp, which a
replica checks every ``orchestrate.catalog_check_interval`` seconds, is what makes
it happen, so a notice lost to a Redis outage costs at most that interval. A process
ignores its own notices: it marked its catalog stale when it wrote. The same notices,
on a channel of their own, tell the workers that the registry's list of MCP servers
changed (:mod:`proxy.mcp.admin`).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable

from redis.asyncio import Redis
from redis.exceptions import RedisError

CHANNEL = "toolgraph:catalog"
RETRY_SECONDS = 2.0

log = logging.getLogger(__name__)


class CatalogNotices:
    """Calls ``changed`` (mark the catalog stale) on this process's writes and, through
    Redis when there is one, on every other process's."""

    def __init__(
        self, redis: Redis | None, changed: Callable[[], None], channel: str = CHANNEL
    ) -> None:
        self._redis = redis
        self._changed = changed
        self._channel = channel
        self._sender = uuid.uuid4().hex.encode()
        self._interrupted = False

    async def announce(self) -> None:
        """A write through this process: re-sync here, and tell the others (a failure
        to tell is logged, never raised: the write is stored)."""
        self._changed()
        if self._redis is None:
            return
        try:
            await self._redis.publish(self._channel, self._sender)
        except (RedisError, OSError) as exc:
            log.warning("the catalog change notice was not sent: %s", exc)

    async def listen(self) -> None:
        """Hear notices until cancelled, subscribing again after a lost connection (one
        warning per outage, not one per try)."""
        while self._redis is not None:
            try:
                await self._receive()
            except (RedisError, OSError) as exc:
                if not self._interrupted:
                    log.warning("catalog notices interrupted, retrying: %s", exc)
                self._interrupted = True
                await asyncio.sleep(RETRY_SECONDS)

    async def _receive(self) -> None:
        assert self._redis is not None
        async with self._redis.pubsub(ignore_subscribe_messages=True) as pubsub:
            await pubsub.subscribe(self._channel)
            if self._interrupted:  # notices may have been missed meanwhile
                self._interrupted = False
                self._changed()
            async for message in pubsub.listen():
                if message.get("data") != self._sender:
                    self._changed()
