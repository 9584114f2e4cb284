"""Orchestrate mode over an MCP server's tools, through the official SDK against the
fake upstream: the plan's calls go out as ``tools/call`` to the tests' stdio server,
one tool's structured output feeding the next; a server that crashes in the middle of
a call fails that call cleanly; a server that is down has its stored tools left out
of what the planner is offered; a client that leaves during a long call has that call
cancelled at the server."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from graph_store.embedded import InProcessStore
from proxy.mcp.catalog import sync_server
from testing.brain import Brain
from tests.conftest import ServerThread, StartProxy
from tests.mcp.conftest import ServeMcp, plan_oslo_weather, python_server, wait_connected
from tests.mcp.server import TOOLS
from tests.orchestrate.conftest import ORCHESTRATE, PROGRESS, read_trace, sdk, trace, user


def orchestrate(
    server: ServerThread, text: str, headers: dict[str, str] | None = None
) -> tuple[str, dict[str, Any]]:
    raw = sdk(server).chat.completions.with_raw_response.create(
        model="fake-model", messages=user(text), extra_body=ORCHESTRATE, extra_headers=headers
    )
    answer = raw.parse().choices[0].message.content or ""
    calls = {
        call["node"]: call for call in trace(server, raw.headers["x-toolgraph-trace-id"])["calls"]
    }
    return answer, calls


def test_a_plan_runs_two_mcp_tools_one_feeding_the_other(serve_mcp: ServeMcp, brain: Brain) -> None:
    server = serve_mcp()
    plan_oslo_weather(brain)
    answer, calls = orchestrate(server, "What is the weather in Oslo?")
    assert [calls[n]["tool"] for n in ("s1", "s2")] == ["test_lookup_city", "test_forecast"]
    assert all(call["outcome"] == "ok" for call in calls.values())
    assert calls["s1"]["output"] == {"city": "oslo", "latitude": 59.91, "longitude": 10.75}
    assert calls["s2"]["output"] == "Sunny at 59.91, 10.75, 21 °C"
    assert calls["s2"]["started"] >= calls["s1"]["finished"]
    assert "Sunny at 59.91" in answer  # the brain's answer quotes every result it was shown


def test_a_server_that_crashes_mid_call_fails_the_call_not_the_request(
    serve_mcp: ServeMcp, brain: Brain
) -> None:
    server = serve_mcp()
    brain.one_step("Stop the server in the middle of the call", "Stop", "test_crash", {})
    answer, calls = orchestrate(server, "Crash the test server, please.")
    (call,) = calls.values()
    assert call["tool"] == "test_crash"
    assert call["outcome"] == "failed"
    assert "went away" in call["error"]
    assert answer  # answered all the same


def test_the_tools_of_a_server_that_is_down_are_not_offered(
    start_proxy: StartProxy, brain: Brain
) -> None:
    # "mute" was synced once (its tools are stored) and now never answers.
    store = InProcessStore.open(Path(os.environ["TOOLGRAPH_DATA_DIR"]) / "graph")
    listing = [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in TOOLS]
    assert sync_server(store, "mute", listing).written == len(TOOLS)
    store.close()
    server = start_proxy(
        mcp_servers=[
            python_server().model_dump(),
            python_server("mute", "--silent", connect_timeout=1.0).model_dump(),
        ],
        planner={"policy": "llm", "top_k": 40, "memory_k": 0},
        orchestrate={"gate": False},
    )
    wait_connected(server)
    brain.one_step(
        "Find the coordinates of Oslo", "coordinates", "test_lookup_city", {"city": "Oslo"}
    )
    raw = sdk(server).chat.completions.with_raw_response.create(
        model="fake-model", messages=user("Where is Oslo?"), extra_body=ORCHESTRATE
    )
    found = trace(server, raw.headers["x-toolgraph-trace-id"])
    offered = {c["tool"] for d in found["plan"]["decisions"] for c in d["candidates"]}
    assert "test_lookup_city" in offered
    assert not {name for name in offered if name.startswith("mute_")}
    assert [call["outcome"] for call in found["calls"]] == ["ok"]


def test_a_destructive_tool_runs_only_under_an_idempotency_key(
    serve_mcp: ServeMcp, brain: Brain
) -> None:
    server = serve_mcp()
    brain.one_step("Delete the record r1", "Delete", "test_reject", {"record": "r1"})
    answer, calls = orchestrate(server, "Delete record r1.")
    (refused,) = calls.values()
    assert refused["outcome"] == "failed"
    assert "runs only under an Idempotency-Key" in refused["error"]
    assert answer  # the request is answered, the tool not called
    brain.one_step("Delete the record r1", "Delete", "test_reject", {"record": "r1"})
    _, calls = orchestrate(server, "Delete record r1.", {"Idempotency-Key": "delete-r1-once"})
    (called,) = calls.values()
    assert "records cannot be deleted" in called["error"]  # the server's own refusal


def test_a_client_that_leaves_during_an_mcp_call_has_it_cancelled_at_the_server(
    serve_mcp: ServeMcp, brain: Brain
) -> None:
    # Neither the call's timeout nor the plan's deadline may cancel it first.
    server = serve_mcp(executor={"call_timeout": 600.0, "deadline": 600.0})
    brain.one_step("Wait for the slow job", "slow job", "test_slow", {"seconds": 600})
    with sdk(server).chat.completions.with_streaming_response.create(
        model="fake-model",
        messages=user("Wait for the slow job."),
        stream=True,
        extra_body=PROGRESS,
    ) as response:
        trace_id = response.headers["x-toolgraph-trace-id"]
        for chunk in response.parse():
            reasoning = (chunk.choices[0].delta.model_extra or {}).get("reasoning_content")
            if "test/slow: sleeping" in str(reasoning):
                break  # the server has the call: leave (the connection is closed)
    # The server heard notifications/cancelled (it waits up to 30 s for one, else says 0)
    brain.one_step("Count the cancelled calls", "cancelled calls", "test_cancellations", {})
    _, calls = orchestrate(server, "How many slow calls were cancelled?")
    assert calls["s1"]["output"] == "1"
    left = saved_trace(server, trace_id)  # the request's task ended, cancelled
    assert left["answer"] == {"kind": "cancelled"}
    assert [(c["tool"], c["outcome"]) for c in left["calls"]] == [("test_slow", "cancelled")]
    assert brain.asked["answer"] == 1  # the second request's only


def saved_trace(server: ServerThread, trace_id: str) -> dict[str, Any]:
    """The trace once it is saved (when the request's task ends)."""
    deadline = time.monotonic() + 60
    while (found := read_trace(server, trace_id)).status_code == 404:
        assert time.monotonic() < deadline, "the trace of the request that was left never came"
        time.sleep(0.05)
    assert found.status_code == 200, found.text
    saved: dict[str, Any] = found.json()
    return saved
