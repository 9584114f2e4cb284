"""Orchestrate mode with HTTP tools on loopback, registered through the registry API:
a DAG with independent branches, a failing tool, a hanging one, a client that leaves."""

from __future__ import annotations

import json
import socket
import time

import httpx
import pytest

from testing.brain import plan_of
from tests.conftest import ServerThread, StartProxy
from tests.orchestrate.conftest import (
    ADMIN,
    ORCHESTRATE,
    PROGRESS,
    Brain,
    LocalTools,
    http_tool,
    only_call,
    read_trace,
    register,
    sdk,
    seed_catalog,
    stream_parts,
    trace,
    user,
)

REQUEST = "How long are the queues at the Oslo and Bergen offices, and what is their sum?"


def serve(
    start_proxy: StartProxy,
    local_tools: LocalTools,
    orchestrate: dict[str, object] | None = None,
    **executor: object,
) -> ServerThread:
    """A proxy whose catalog has the local tools: the two that work registered through
    the API (which test-calls them), the broken and the hanging one imported (the
    registry's test call would refuse them)."""
    base = local_tools.url
    seed_catalog(
        [
            http_tool("inventory_db", "Stock levels from the inventory database", f"{base}/broken"),
            http_tool("legacy_mainframe", "Records from the legacy mainframe", f"{base}/hang"),
        ]
    )
    server = start_proxy(
        admin_key=ADMIN,
        planner={"policy": "llm", "top_k": 10, "memory_k": 0},
        executor={"allow_private_networks": True, "retries": 0, **executor},
        orchestrate=orchestrate or {},
    )
    register(
        server,
        [
            http_tool("oslo_queue", "Queue length at the Oslo office", f"{base}/sleep"),
            http_tool("bergen_queue", "Queue length at the Bergen office", f"{base}/sleep"),
        ],
    )
    return server


def plan_the_mainframe(brain: Brain) -> None:
    """One call, to the tool that never answers."""
    brain.one_step(
        "Fetch the records from the legacy mainframe",
        "mainframe",
        "legacy_mainframe",
        {"label": "records"},
    )


def test_independent_branches_run_in_parallel_and_their_join_after_both(
    start_proxy: StartProxy, local_tools: LocalTools, brain: Brain
) -> None:
    server = serve(start_proxy, local_tools)
    brain.plan = plan_of(
        ("Get the queue length at the Oslo office", []),
        ("Get the queue length at the Bergen office", []),
        ("Add the two queue lengths", ["s1", "s2"]),
    )
    brain.tools = {"Oslo": "oslo_queue", "Bergen": "bergen_queue", "Add": "evaluate_expression"}
    brain.arguments = {
        "Oslo": {"label": "oslo", "seconds": 0.6},
        "Bergen": {"label": "bergen", "seconds": 0.6},
        "Add": {"expression": "12 + 30"},
    }
    with sdk(server).chat.completions.with_streaming_response.create(
        model="fake-model", messages=user(REQUEST), stream=True, extra_body=PROGRESS
    ) as response:
        content, reasoning, _ = stream_parts(response.parse())
        trace_id = response.headers["x-toolgraph-trace-id"]
    calls = {call["node"]: call for call in trace(server, trace_id)["calls"]}
    assert [calls[n]["tool"] for n in ("s1", "s2", "s3")] == [
        "oslo_queue",
        "bergen_queue",
        "evaluate_expression",
    ]
    assert all(call["outcome"] == "ok" for call in calls.values())
    oslo, bergen, add = calls["s1"], calls["s2"], calls["s3"]
    # both lookups were in flight at once: each started before the other finished
    assert oslo["started"] < bergen["finished"]
    assert bergen["started"] < oslo["finished"]
    # the join waited for both
    assert add["started"] >= max(oslo["finished"], bergen["finished"])
    assert calls["s3"]["output"]["value"] == 42
    assert "s3=" in content
    assert "42" in content
    assert local_tools.hits["sleep"] >= 2
    assert "calling oslo_queue, bergen_queue, evaluate_expression…" in reasoning


def plan_a_failing_branch(brain: Brain) -> None:
    """s1 works, s2 fails (the broken tool), s3 needs both."""
    brain.plan = plan_of(
        ("Get the queue length at the Oslo office", []),
        ("Get the stock levels from the inventory database", []),
        ("Divide the stock by the queue length", ["s1", "s2"]),
    )
    brain.tools = {
        "Oslo": "oslo_queue",
        "inventory": "inventory_db",
        "Divide": "evaluate_expression",
    }
    brain.arguments = {
        "Oslo": {"label": "oslo"},
        "inventory": {"label": "all"},
        "Divide": {"expression": "1/2"},
    }


def test_a_failing_tool_fails_only_what_depends_on_it_and_the_answer_says_so(
    start_proxy: StartProxy, local_tools: LocalTools, brain: Brain
) -> None:
    server = serve(start_proxy, local_tools)
    plan_a_failing_branch(brain)
    raw = sdk(server).chat.completions.with_raw_response.create(
        model="fake-model", messages=user(REQUEST), extra_body=ORCHESTRATE
    )
    assert raw.status_code == 200
    calls = {c["node"]: c for c in trace(server, raw.headers["x-toolgraph-trace-id"])["calls"]}
    assert calls["s1"]["outcome"] == "ok"
    assert calls["s2"]["outcome"] == "failed"
    assert "500" in calls["s2"]["error"]
    assert calls["s3"]["outcome"] == "skipped"
    assert "needs s2" in calls["s3"]["error"]
    answer_prompt = brain.prompts[-1][1]
    assert "Could not be done:" in answer_prompt
    assert "s2 (inventory_db): failed" in answer_prompt
    assert '<result id="s1">' in answer_prompt  # what did work still reaches the answer
    # a failed call is not planned again: the answer says what failed
    assert brain.asked["decompose"] == 1
    assert local_tools.hits["broken"] == 1


def test_a_tool_that_hangs_times_out_and_is_abandoned(
    start_proxy: StartProxy, local_tools: LocalTools, brain: Brain
) -> None:
    server = serve(start_proxy, local_tools, call_timeout=1.0)
    plan_the_mainframe(brain)
    call = only_call(server, user("Fetch my records."))
    assert call["outcome"] == "timeout"  # the call's own 1 s timeout, not the request's
    assert "s1 (legacy_mainframe): timeout" in brain.prompts[-1][1]
    _wait_for(lambda: local_tools.gone == 1)  # the proxy hung up on the tool


def test_a_client_that_disconnects_mid_stream_cancels_the_running_tools(
    start_proxy: StartProxy, local_tools: LocalTools, brain: Brain
) -> None:
    server = serve(start_proxy, local_tools, call_timeout=60.0)
    plan_the_mainframe(brain)
    with sdk(server).chat.completions.with_streaming_response.create(
        model="fake-model", messages=user("Fetch my records."), stream=True, extra_body=PROGRESS
    ) as response:
        trace_id = response.headers["x-toolgraph-trace-id"]
        for chunk in response.parse():
            extra = chunk.choices[0].delta.model_extra or {}
            if "calling" in str(extra.get("reasoning_content")):
                break
        _wait_for(lambda: local_tools.hits["hang"] == 1)  # leave once the call is out
    _wait_for(lambda: local_tools.gone == 1)  # the tool call was cancelled, not left running
    recorded = _wait_for_trace(server, trace_id)
    assert recorded["answer"] == {"kind": "cancelled"}
    assert brain.asked["answer"] == 0


def test_a_client_that_gives_up_on_a_non_streamed_answer_cancels_the_tools(
    start_proxy: StartProxy, local_tools: LocalTools, brain: Brain
) -> None:
    server = serve(start_proxy, local_tools, call_timeout=60.0)
    plan_the_mainframe(brain)
    body = json.dumps({"model": "fake-model", "messages": user("Records?"), **ORCHESTRATE})
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as client:
        client.sendall(
            f"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\n"
            f"content-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n{body}".encode()
        )
        _wait_for(lambda: local_tools.hits["hang"] == 1)  # the call is out: hang up
    _wait_for(lambda: local_tools.gone == 1)
    assert brain.asked["answer"] == 0


@pytest.mark.parametrize("stream", [False, True])
def test_the_request_deadline_ends_running_tools_with_a_504(
    start_proxy: StartProxy, local_tools: LocalTools, brain: Brain, stream: bool
) -> None:
    seed_catalog([http_tool("legacy_mainframe", "Records from the legacy mainframe",
                            f"{local_tools.url}/hang")])  # fmt: skip
    server = start_proxy(
        planner={"policy": "llm", "top_k": 10, "memory_k": 0},
        executor={"allow_private_networks": True, "call_timeout": 60.0},
        orchestrate={"preload": True},  # the model's load is not the request's time
        timeouts={"request": 3.0},
    )
    plan_the_mainframe(brain)
    body = {"model": "fake-model", "messages": user("Records?"), "stream": stream, **ORCHESTRATE}
    response = httpx.post(f"{server.url}/v1/chat/completions", json=body, timeout=30)
    if stream:
        assert response.status_code == 200
        assert '"code":"upstream_timeout"' in response.text
        assert "[DONE]" not in response.text
    else:
        assert response.status_code == 504
        assert response.json()["error"]["code"] == "upstream_timeout"
        assert response.headers["x-should-retry"] == "false"  # the tool had started
    assert "timeouts.request" in response.text
    _wait_for(lambda: local_tools.gone == 1)


def test_a_key_whose_request_still_runs_is_a_409_the_sdk_may_retry(
    start_proxy: StartProxy, local_tools: LocalTools, brain: Brain
) -> None:
    server = serve(start_proxy, local_tools, call_timeout=60.0)
    plan_the_mainframe(brain)
    body = {"model": "fake-model", "messages": user("Fetch my records."), "stream": True}
    headers = {"idempotency-key": "slow-1"}
    url = f"{server.url}/v1/chat/completions"
    with httpx.stream("POST", url, json={**body, **ORCHESTRATE}, headers=headers, timeout=30):
        _wait_for(lambda: local_tools.hits["hang"] == 1)
        second = httpx.post(url, json={**body, **ORCHESTRATE}, headers=headers, timeout=30)
        assert second.status_code == 409
        assert second.json()["error"]["code"] == "idempotency_key_in_use"
        assert second.headers["retry-after"] == "1"
        assert "x-should-retry" not in second.headers
    _wait_for(lambda: local_tools.gone == 1)
    # the first client went away after its tool started: a retry never runs it again
    retry = lambda: httpx.post(url, json={**body, **ORCHESTRATE}, headers=headers, timeout=30)  # noqa: E731
    _wait_for(lambda: retry().json()["error"]["code"] != "idempotency_key_in_use")
    final = retry()
    assert final.status_code == 409
    assert final.json()["error"]["code"] == "idempotent_request_abandoned"
    assert final.headers["x-should-retry"] == "false"
    assert local_tools.hits["hang"] == 1


def test_calls_to_loopback_and_metadata_addresses_are_refused(
    start_proxy: StartProxy, local_tools: LocalTools, brain: Brain
) -> None:
    server = start_proxy(admin_key=ADMIN, planner={"policy": "llm", "top_k": 10, "memory_k": 0})
    internal = http_tool("internal_status", "The internal status page", f"{local_tools.url}/sleep")
    response = httpx.post(
        f"{server.url}/v1/toolgraph/tools",
        json={"openai": [internal]},
        headers={"authorization": f"Bearer {ADMIN}"},
        timeout=30,
    )
    assert response.status_code == 422  # the registry's test call is refused
    assert "non-public address" in response.json()["error"]["message"]
    assert local_tools.hits["sleep"] == 0


@pytest.mark.parametrize(
    ("url", "refusal"),
    [
        ("http://127.0.0.1:{port}/sleep", "non-public address (127.0.0.1)"),
        ("http://169.254.169.254/latest/meta-data/iam/", "non-public address (169.254.169.254)"),
        ("http://[::ffff:127.0.0.1]:{port}/sleep", "non-public address"),
    ],
)
def test_a_catalog_tool_aimed_at_internal_addresses_is_refused_at_call_time(
    start_proxy: StartProxy, local_tools: LocalTools, brain: Brain, url: str, refusal: str
) -> None:
    port = local_tools.url.rsplit(":", 1)[1]
    seed_catalog([http_tool("internal_status", "The internal status page", url.format(port=port))])
    server = start_proxy(planner={"policy": "llm", "top_k": 10, "memory_k": 0})
    brain.one_step("Read the internal status page", "status", "internal_status", {"label": "all"})
    call = only_call(server, user("What does the status page say?"))
    assert call["tool"] == "internal_status"
    assert call["outcome"] == "failed"
    assert refusal in call["error"]
    assert local_tools.hits["sleep"] == 0


def test_the_stream_stays_alive_while_tools_run(
    start_proxy: StartProxy, local_tools: LocalTools, brain: Brain
) -> None:
    server = serve(start_proxy, local_tools, orchestrate={"keepalive": 0.2})
    brain.one_step(
        "Get the queue length at the Oslo office",
        "Oslo",
        "oslo_queue",
        {"label": "oslo", "seconds": 1.0},
    )
    body = {"model": "fake-model", "messages": user("Oslo queue?"), "stream": True, **ORCHESTRATE}
    with httpx.stream(
        "POST", f"{server.url}/v1/chat/completions", json=body, timeout=30
    ) as response:
        text = "".join(response.iter_text())
    keepalives = text.count(": keep-alive\n\n")
    assert keepalives >= 3  # one per 0.2 s of a 1 s tool call, before any data
    assert text.index(": keep-alive") < text.index("data: ")
    assert text.rstrip().endswith("data: [DONE]")


def test_a_tool_registered_after_the_catalog_loaded_is_planned_with(
    start_proxy: StartProxy, local_tools: LocalTools, brain: Brain
) -> None:
    server = serve(start_proxy, local_tools)
    brain.one_step("Evaluate 2*pi*50", "2*pi*50", "evaluate_expression", {"expression": "2*pi*50"})
    sdk(server).chat.completions.create(  # loads the catalog
        model="fake-model", messages=user("Evaluate 2*pi*50."), extra_body=ORCHESTRATE
    )
    register(
        server,
        [http_tool("tromso_queue", "Queue at the Tromso office", f"{local_tools.url}/sleep")],
    )
    brain.one_step(
        "Get the queue at the Tromso office", "Tromso", "tromso_queue", {"label": "tromso"}
    )
    call = only_call(server, user("Tromso queue?"))
    assert call["tool"] == "tromso_queue"
    assert call["outcome"] == "ok"


def test_tool_credentials_reach_the_tool_but_never_the_trace_or_an_llm(
    start_proxy: StartProxy, local_tools: LocalTools, brain: Brain, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "tool-secret-9f8e7d6c5b4a"
    monkeypatch.setenv("ECHO_TOOL_KEY", secret)
    seed_catalog([http_tool("echo_status", "The status echo service", f"{local_tools.url}/echo")])
    server = start_proxy(
        planner={"policy": "llm", "top_k": 10, "memory_k": 0},
        executor={
            "allow_private_networks": True,
            "credentials": [{"host": "127.0.0.1", "env": "ECHO_TOOL_KEY", "header": "x-api-key"}],
        },
    )
    brain.one_step("Read the status echo", "status", "echo_status", {"label": "all"})
    raw = sdk(server).chat.completions.with_raw_response.create(
        model="fake-model", messages=user("Status?"), extra_body=ORCHESTRATE
    )
    assert local_tools.hits["echo"] == 1
    recorded = read_trace(server, raw.headers["x-toolgraph-trace-id"]).text
    assert '"outcome":"ok"' in recorded
    assert secret not in recorded  # the tool echoed it; the trace masks it
    assert "***" in recorded
    assert all(secret not in text for _, text in brain.prompts)  # nor did any LLM see it
    assert secret not in raw.text


def _wait_for(condition: object, seconds: float = 90) -> None:
    assert callable(condition)
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.05)


def _wait_for_trace(server: ServerThread, trace_id: str) -> dict[str, object]:
    deadline = time.monotonic() + 10
    while True:
        response = read_trace(server, trace_id)
        if response.status_code == 200:
            found: dict[str, object] = response.json()
            return found
        assert time.monotonic() < deadline, response.text
        time.sleep(0.05)
