"""Two processes sharing a Redis and a graph store (two workers, or two replicas on
Neo4j): an MCP server added through the registry API on one is started and run by
the other, and stopped there when it is removed. A real redis-server of the test's
own: the kept list would otherwise reach the other tests' proxies."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from testing.brain import Brain
from tests.conftest import ServerThread, StartProxy, running_redis
from tests.mcp.conftest import wait_connected
from tests.mcp.test_registry import ADMIN, SERVERS, admin, spec
from tests.orchestrate.conftest import ORCHESTRATE, sdk, trace, user


@pytest.fixture
def redis_url() -> Iterator[str]:
    with running_redis() as redis:
        yield redis.url


def until(what: str, done: Callable[[], bool]) -> None:
    """Until ``done()``, asked of the other process's API (no event crosses processes)."""
    deadline = time.monotonic() + 120
    while not done():
        if time.monotonic() > deadline:
            pytest.fail(f"the other process never {what}")
        time.sleep(0.1)


def servers(proxy: ServerThread) -> dict[str, dict[str, Any]]:
    return {s["name"]: s for s in admin(proxy, "GET", SERVERS).json()["data"]}


def worker(start_proxy: StartProxy, redis_url: str) -> ServerThread:
    proxy = start_proxy(
        admin_key=ADMIN,
        mcp_registry_commands=True,
        redis_url=redis_url,
        planner={"policy": "llm", "top_k": 20, "memory_k": 0},
        orchestrate={"gate": False},
    )
    wait_connected(proxy)
    return proxy


def test_a_server_added_on_one_worker_runs_on_the_other(
    redis_url: str, start_proxy: StartProxy, brain: Brain
) -> None:  # Redis first: it stops after the proxies
    first, second = worker(start_proxy, redis_url), worker(start_proxy, redis_url)
    added = admin(first, "POST", SERVERS, json=spec("shared"))
    assert added.status_code == 201, added.text
    until("started it", lambda: servers(second).get("shared", {}).get("connected") is True)
    assert servers(second)["shared"]["source"] == "registry"

    brain.one_step(
        "Find the coordinates of Oslo", "coordinates", "shared_lookup_city", {"city": "Oslo"}
    )
    raw = sdk(second).chat.completions.with_raw_response.create(
        model="fake-model", messages=user("Where is Oslo?"), extra_body=ORCHESTRATE
    )
    (call,) = trace(second, raw.headers["x-toolgraph-trace-id"])["calls"]
    assert (call["tool"], call["outcome"]) == ("shared_lookup_city", "ok")

    assert admin(first, "DELETE", f"{SERVERS}/shared").status_code == 200
    until("stopped it", lambda: "shared" not in servers(second))
    assert servers(first) == {}


def test_without_redis_the_other_worker_starts_it_when_it_restarts(
    start_proxy: StartProxy,
) -> None:
    first = start_proxy(admin_key=ADMIN, mcp_registry_commands=True)
    second = start_proxy(admin_key=ADMIN, mcp_registry_commands=True)
    assert admin(first, "POST", SERVERS, json=spec("shared")).status_code == 201
    assert "shared" not in servers(second)  # the documented limit: no notice without Redis
    second.__exit__()
    again = start_proxy(admin_key=ADMIN, mcp_registry_commands=True)
    wait_connected(again)
    assert servers(again)["shared"]["connected"] is True
    httpx.get(f"{again.url}/readyz", timeout=10).raise_for_status()
