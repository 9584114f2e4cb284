"""Why the relay uses aiohttp: one request's cost through each async HTTP client.

Both clients send the same small chat request, one at a time over a kept-alive
connection, to the fake upstream in this process's own server thread; rounds
alternate between the clients so that a busy machine slows both alike.

    python -m eval.bench_http_clients [--rounds 10] [--requests 300]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Awaitable, Callable

import aiohttp
import httpx
import orjson
import uvloop

from eval.fake_upstream import FakeUpstream

BODY = orjson.dumps({"model": "m", "messages": [{"role": "user", "content": "hello there"}]})
HEADERS = {"content-type": "application/json"}

Send = Callable[[], Awaitable[bytes]]


async def measure(clients: dict[str, Send], rounds: int, requests: int) -> dict[str, list[float]]:
    seconds: dict[str, list[float]] = {name: [] for name in clients}
    for _ in range(rounds):
        for name, send in clients.items():
            for i in range(requests):
                started = time.perf_counter()
                await send()
                if i >= requests // 10:  # the first tenth of each round warms up
                    seconds[name].append(time.perf_counter() - started)
    return seconds


async def run(url: str, rounds: int, requests: int) -> dict[str, list[float]]:
    async with httpx.AsyncClient() as pool, aiohttp.ClientSession() as session:

        async def with_httpx() -> bytes:
            return (await pool.post(url, content=BODY, headers=HEADERS)).content

        async def with_aiohttp() -> bytes:
            async with session.post(url, data=BODY, headers=HEADERS) as response:
                return await response.read()

        return await measure({"httpx": with_httpx, "aiohttp": with_aiohttp}, rounds, requests)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--requests", type=int, default=300)
    args = parser.parse_args()
    fake = FakeUpstream().start()
    try:
        seconds = uvloop.run(run(f"{fake.base_url}/chat/completions", args.rounds, args.requests))
    finally:
        fake.stop()
    print(f"{'client':8} {'p50 ms':>8} {'p99 ms':>8}")
    for name, values in seconds.items():
        values.sort()
        p99 = values[int(len(values) * 0.99)]
        print(f"{name:8} {statistics.median(values) * 1e3:8.3f} {p99 * 1e3:8.3f}")


if __name__ == "__main__":
    main()
