"""Replicas behind one load balancer: two proxies sharing Redis and the Bolt graph
store (ArcadeDB), each with its own data directory. A tool registered, replaced or
deleted through one is used, or no longer used, by the other without a restart."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from graph_store.neo4j_store import Neo4jStore
from tests.conftest import ServerThread, StartProxy
from tests.orchestrate.conftest import (
    ADMIN,
    ORCHESTRATE,
    Brain,
    LocalTools,
    http_tool,
    register,
    sdk,
    trace,
    user,
)

TOOL = "track_parcel"


# How a replica learns of the other's write: the Redis notice alone (the stamp is
# checked once an hour), or the graph store's stamp alone (no Redis to carry notices).
WAYS: dict[str, dict[str, object]] = {
    "notice": {"orchestrate": {"catalog_check_interval": 3600}},
    "stamp": {"redis_url": None, "orchestrate": {"catalog_check_interval": 1}},
}


@pytest.fixture(params=list(WAYS))
def replicas(
    start_proxy: StartProxy,
    redis_server: str,
    bolt_uri: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> Iterator[tuple[ServerThread, ServerThread]]:
    clear_graph(bolt_uri)
    shared: dict[str, object] = {
        "admin_key": ADMIN,
        "redis_url": redis_server,
        "neo4j_uri": bolt_uri,
        "planner": {"policy": "llm", "top_k": 10, "memory_k": 0},
        "executor": {"allow_private_networks": True, "retries": 0},
        **WAYS[request.param],
    }
    yield (
        start_proxy(data_dir=tmp_path / "a", **shared),
        start_proxy(data_dir=tmp_path / "b", **shared),
    )
    clear_graph(bolt_uri)


def clear_graph(bolt_uri: str) -> None:
    store = Neo4jStore.from_uri(bolt_uri)
    store.clear()
    store.close()


def tools_called(server: ServerThread) -> list[str]:
    """Ask ``server`` to track a parcel; the tools its plan called."""
    raw = sdk(server, timeout=120).chat.completions.with_raw_response.create(
        model="fake-model", messages=user("Where is parcel p1?"), extra_body=ORCHESTRATE
    )
    calls = trace(server, raw.headers["x-toolgraph-trace-id"])["calls"]
    return [call["tool"] for call in calls if call["outcome"] == "ok"]


def wait_for(condition: Callable[[], bool], what: str, within: float = 60) -> None:
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {within} s: {what}")
        time.sleep(0.2)


def test_a_tool_changed_through_one_replica_is_used_by_the_other(
    replicas: tuple[ServerThread, ServerThread], brain: Brain, local_tools: LocalTools
) -> None:
    writer, reader = replicas
    brain.one_step("Track parcel p1", "parcel", TOOL, {"label": "p1"})
    assert TOOL not in tools_called(reader)  # its catalog is loaded, without the tool

    register(writer, [http_tool(TOOL, "Where a parcel is now", f"{local_tools.url}/echo")])
    wait_for(lambda: TOOL in tools_called(reader), "the other replica uses the new tool")

    register(writer, [http_tool(TOOL, "Where a parcel is now", f"{local_tools.url}/sleep")])
    sleeps = local_tools.hits["sleep"]
    wait_for(
        lambda: TOOL in tools_called(reader) and local_tools.hits["sleep"] > sleeps,
        "the other replica calls the replaced tool's new endpoint",
    )

    deleted = httpx.delete(
        f"{writer.url}/v1/toolgraph/tools/{TOOL}",
        headers={"authorization": f"Bearer {ADMIN}"},
        timeout=30,
    )
    assert deleted.status_code == 200, deleted.text
    wait_for(lambda: TOOL not in tools_called(reader), "the other replica drops the tool")
