"""The load benchmark's driver: concurrent keep-alive workers, one record per request.

Each worker holds one connection (:class:`eval._bench_client.Connection`) and sends
request after request until the run's time or request count is spent; every
request gets its own body (``body_for(index)``), so a server sees distinct
queries, and headers of its own if ``headers_for(index)`` gives any; each leaves
an :class:`Outcome`: when it started and ended, the status, and whether the
client may retry it (no ``x-should-retry: false``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from eval._bench_client import (
    Connection,
    Endpoint,
    ProtocolError,
    Response,
    build_request,
    is_complete,
)

NO_ANSWER = 0  # the status of a request that got no HTTP answer (reset, timeout)


@dataclass(frozen=True, slots=True)
class Outcome:
    """One request; times in seconds since the run began."""

    index: int
    started: float
    ended: float
    status: int
    complete: bool  # a 200 with a whole completion, or a stream that reached [DONE]
    retryable: bool  # an error the official SDK would send again
    error: str = ""

    @property
    def latency(self) -> float:
        return self.ended - self.started


@dataclass
class Load:
    """``concurrency`` workers against ``endpoint``; ``outcomes`` fills as they answer."""

    endpoint: Endpoint
    body_for: Callable[[int], bytes]
    headers: Mapping[str, str]
    concurrency: int
    stream: bool
    timeout: float
    headers_for: Callable[[int], Mapping[str, str]] = lambda index: {}
    outcomes: list[Outcome] = field(default_factory=list)
    _next: int = 0
    _started: float = 0.0

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self._started if self._started else 0.0

    async def run(self, seconds: float, requests: int | None = None) -> None:
        """Send until ``seconds`` have passed or ``requests`` were sent; in-flight ones finish."""
        self._started = self._started or time.perf_counter()
        stop_at = self.elapsed + seconds
        limit = None if requests is None else self._next + requests
        async with asyncio.TaskGroup() as group:
            for _ in range(self.concurrency):
                group.create_task(self._work(stop_at, limit))

    async def _work(self, stop_at: float, limit: int | None) -> None:
        connection = Connection(self.endpoint)
        try:
            while self.elapsed < stop_at and (limit is None or self._next < limit):
                index, self._next = self._next, self._next + 1
                await self._one(connection, index)
        finally:
            connection.close()

    async def _one(self, connection: Connection, index: int) -> None:
        headers = {**self.headers, **self.headers_for(index)}
        request = build_request(self.endpoint, self.body_for(index), headers)
        started = self.elapsed
        try:
            async with asyncio.timeout(self.timeout):
                response = await connection.exchange(request, time.perf_counter)
        except (OSError, TimeoutError, asyncio.IncompleteReadError, ProtocolError) as exc:
            connection.close()
            reason = f"{type(exc).__name__}: {exc}"
            self.outcomes.append(
                Outcome(index, started, self.elapsed, NO_ANSWER, False, True, reason)
            )
            return
        self.outcomes.append(self._outcome(index, started, response))

    def _outcome(self, index: int, started: float, response: Response) -> Outcome:
        complete = is_complete(response, self.stream)
        return Outcome(
            index=index,
            started=started,
            ended=self.elapsed,
            status=response.status,
            complete=complete,
            retryable=response.headers.get("x-should-retry", "").lower() != "false",
            error="" if complete else response.body[:300].decode("utf-8", "replace"),
        )
