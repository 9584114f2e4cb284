"""Readiness: a check per configured store, run together, each under a timeout.

A check reads ``ok``, ``loading`` (it raised :class:`Loading`: a part still loading at
start-up, which requests wait for), ``timed out`` or ``failed: <error>``. Work that
goes on in the background once the process is ready (the catalog's sync at start-up)
is shown beside the checks, in words, without deciding readiness.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import aiohttp
from redis.asyncio import Redis

CHECK_TIMEOUT_SECONDS = 2.0

Check = Callable[[], Awaitable[None]]


class Loading(Exception):
    """Raised by a check whose part is still loading at start-up."""


@dataclass(frozen=True, slots=True)
class Readiness:
    """The checks of every store that is configured, by name."""

    checks: dict[str, Check]
    #: Background work by name, each read as a word (``running``, ``done``…).
    background: dict[str, Callable[[], str]] = field(default_factory=dict)

    def states(self) -> dict[str, str]:
        return {name: state() for name, state in self.background.items()}

    async def run(self) -> dict[str, str]:
        names = list(self.checks)
        results = await asyncio.gather(*(_run_check(self.checks[n]) for n in names))
        return dict(zip(names, results, strict=True))


def redis_check(client: Redis) -> Check:
    async def check() -> None:
        await client.ping()

    return check


def http_check(session: aiohttp.ClientSession, url: str) -> Check:
    async def check() -> None:
        async with session.get(url) as response:
            response.raise_for_status()

    return check


def neo4j_check(uri: str) -> Check:
    from neo4j import AsyncGraphDatabase

    from graph_store.neo4j_store import bolt_target

    address, auth, _ = bolt_target(uri)

    async def check() -> None:
        async with AsyncGraphDatabase.driver(address, auth=auth) as driver:
            await driver.verify_connectivity()

    return check


async def _run_check(check: Check) -> str:
    try:
        async with asyncio.timeout(CHECK_TIMEOUT_SECONDS):
            await check()
    except TimeoutError:
        return "timed out"
    except Loading:
        return "loading"
    except Exception as exc:  # a failing store of any kind reads as "not ready"
        return f"failed: {type(exc).__name__}"
    return "ok"
