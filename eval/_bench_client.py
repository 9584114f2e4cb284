"""The overhead benchmark's load generator: a minimal HTTP/1.1 keep-alive client.

One connection per concurrent worker (TCP_NODELAY), one fixed request sent again
and again, each response read to its last byte: ``content-length`` bytes, or
chunks up to the terminal 0-chunk. It does the least a client can so that its own
cost stays small on a machine with few cores, and since the same client drives
every target, what cost it has cancels out of the added latency.
"""

from __future__ import annotations

import asyncio
import gc
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

Clock = Callable[[], float]

# Far above any answer the benchmark expects; a stuck target fails its cell, not the run.
REQUEST_TIMEOUT_SECONDS = 30.0


class ProtocolError(Exception):
    """A response this client cannot read to its end."""


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    headers: dict[str, str]
    body: bytes
    first_body_at: float | None  # the clock when the first body bytes were in


@dataclass(frozen=True, slots=True)
class Endpoint:
    host: str
    port: int
    path: str = "/v1/chat/completions"


@dataclass(slots=True)
class Samples:
    """What one cell measured; seconds throughout."""

    latencies: list[float] = field(default_factory=list)
    first_byte: list[float] = field(default_factory=list)
    errors: int = 0
    first_error: str | None = None
    elapsed: float = 0.0

    def fail(self, reason: str) -> None:
        self.errors += 1
        if self.first_error is None:
            self.first_error = reason


def build_request(endpoint: Endpoint, body: bytes, headers: Mapping[str, str]) -> bytes:
    """The bytes of one keep-alive POST of ``body``."""
    lines = [
        f"POST {endpoint.path} HTTP/1.1",
        f"host: {endpoint.host}:{endpoint.port}",
        "content-type: application/json",
        f"content-length: {len(body)}",
        *(f"{name}: {value}" for name, value in headers.items()),
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def parse_head(head: bytes) -> tuple[int, dict[str, str]]:
    """Status and lower-cased headers of a response head ending in a blank line."""
    status_line, *lines = head.decode("latin-1").rstrip("\r\n").split("\r\n")
    parts = status_line.split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
        raise ProtocolError(f"not an HTTP/1.x status line: {status_line!r}")
    headers: dict[str, str] = {}
    for line in lines:
        name, sep, value = line.partition(":")
        if not sep:
            raise ProtocolError(f"malformed header line: {line!r}")
        headers[name.strip().lower()] = value.strip()
    return int(parts[1]), headers


async def read_response(reader: asyncio.StreamReader, clock: Clock = time.perf_counter) -> Response:
    """Read one whole response; the connection is then ready for the next."""
    status, headers = parse_head(await reader.readuntil(b"\r\n\r\n"))
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body, first = await _read_chunked(reader, clock)
    elif "content-length" in headers:
        length = int(headers["content-length"])
        body = await reader.readexactly(length)
        first = clock() if length else None
    else:
        raise ProtocolError("a response with neither content-length nor chunked encoding")
    return Response(status, headers, body, first)


async def _read_chunked(reader: asyncio.StreamReader, clock: Clock) -> tuple[bytes, float | None]:
    parts: list[bytes] = []
    first: float | None = None
    while True:
        size_line = await reader.readuntil(b"\r\n")
        try:
            size = int(size_line.split(b";", 1)[0].strip(), 16)
        except ValueError:
            raise ProtocolError(f"bad chunk size line: {size_line!r}") from None
        if size == 0:
            break
        chunk = await reader.readexactly(size + 2)
        if chunk[-2:] != b"\r\n":
            raise ProtocolError("a chunk not followed by CRLF")
        if first is None:
            first = clock()
        parts.append(chunk[:-2])
    while await reader.readuntil(b"\r\n") != b"\r\n":
        pass  # trailer fields, unused
    return b"".join(parts), first


def is_complete(response: Response, stream: bool) -> bool:
    """A 200 whose body is a whole chat completion (or Responses API response), or a
    stream that reached [DONE] (or a Responses stream its ``response.completed``,
    an event that carries the whole response: looked for in the last few KB)."""
    if response.status != 200:
        return False
    if stream:
        tail = response.body[-64:]
        return b"data: [DONE]" in tail or b"event: response.completed\n" in response.body[-8192:]
    return b'"choices"' in response.body or b'"object":"response"' in response.body


class _Budget:
    """Hands out request slots until a count or a deadline is reached."""

    def __init__(self, count: int, deadline: float, clock: Clock) -> None:
        self._left = count
        self._deadline = deadline
        self._clock = clock

    def take(self) -> bool:
        if self._left <= 0 or self._clock() >= self._deadline:
            return False
        self._left -= 1
        return True


class Connection:
    """One keep-alive connection, opened on first use and again after :meth:`close`."""

    def __init__(self, endpoint: Endpoint) -> None:
        self._endpoint = endpoint
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def exchange(self, request: bytes, clock: Clock) -> Response:
        if self._reader is None or self._writer is None:
            self._reader, self._writer = await self._open()
        self._writer.write(request)
        return await read_response(self._reader, clock)

    async def _open(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        reader, writer = await asyncio.open_connection(self._endpoint.host, self._endpoint.port)
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return reader, writer

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._reader = self._writer = None


class Cell:
    """One target at one concurrency in one mode: warm up, then measure."""

    def __init__(
        self,
        endpoint: Endpoint,
        request: bytes,
        concurrency: int,
        stream: bool,
        clock: Clock = time.perf_counter,
    ) -> None:
        self._request = request
        self._stream = stream
        self._clock = clock
        self._connections = [Connection(endpoint) for _ in range(concurrency)]
        self.samples = Samples()
        self.done = 0  # requests answered so far, warm-up included; read for progress

    async def run(self, warmup: int, requests: int, max_seconds: float) -> Samples:
        """Send ``warmup`` unmeasured requests, then ``requests`` measured ones.

        Each phase also stops at ``max_seconds``; requests in flight then finish.
        """
        try:
            await self._phase(warmup, max_seconds, None)
            gc.collect()
            gc.disable()  # the client's own collector pauses would land in the tail
            try:
                started = self._clock()
                await self._phase(requests, max_seconds, self.samples)
                self.samples.elapsed = self._clock() - started
            finally:
                gc.enable()
        finally:
            for connection in self._connections:
                connection.close()
        return self.samples

    async def _phase(self, count: int, max_seconds: float, samples: Samples | None) -> None:
        budget = _Budget(count, self._clock() + max_seconds, self._clock)
        async with asyncio.TaskGroup() as group:
            for connection in self._connections:
                group.create_task(self._work(connection, budget, samples))

    async def _work(self, connection: Connection, budget: _Budget, samples: Samples | None) -> None:
        record = samples if samples is not None else Samples()
        while budget.take():
            started = self._clock()
            try:
                async with asyncio.timeout(REQUEST_TIMEOUT_SECONDS):
                    response = await connection.exchange(self._request, self._clock)
            except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
                record.fail(f"{type(exc).__name__}: {exc}")
                connection.close()
                continue
            except ProtocolError as exc:
                record.fail(str(exc))
                connection.close()
                continue
            ended = self._clock()
            self.done += 1
            if not is_complete(response, self._stream):
                record.fail(f"HTTP {response.status}: {response.body[:200]!r}")
                continue
            record.latencies.append(ended - started)
            if response.first_body_at is not None:
                record.first_byte.append(response.first_body_at - started)
