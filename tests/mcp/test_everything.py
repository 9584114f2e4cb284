"""The reference test server, npm's ``@modelcontextprotocol/server-everything`` (pinned in
tests/mcp/node/package-lock.json, installed by ``make mcp-servers``), run with
Debian's ``node``: over stdio and over streamable HTTP. Missing, it fails under CI."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from graph_store.embedded import InProcessStore
from graph_store.models import Tool
from proxy.config import McpServerSettings
from proxy.errors import ToolError, ToolTimeout
from proxy.execute.egress import EgressPolicy
from proxy.execute.progress import reported_to
from proxy.mcp.sources import McpSources
from testing.brain import Brain
from tests.conftest import StartProxy, free_port, unavailable
from tests.mcp.conftest import wait_connected
from tests.orchestrate.conftest import PROGRESS, sdk, stream_parts, user

ENTRY = (
    Path(__file__).parent
    / "node/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
)


def node() -> str:
    found = shutil.which("node")
    if found is None:
        unavailable("node is not installed (apt-get install nodejs)")
    if not ENTRY.exists():
        unavailable("server-everything is not installed: run `make mcp-servers`")
    assert found is not None
    return found


#: The tools' egress policy with loopback allowed: the HTTP server runs on 127.0.0.1.
LOCAL = EgressPolicy(allow_private=True)


@contextlib.asynccontextmanager
async def started(
    server: McpServerSettings, store: InProcessStore, policy: EgressPolicy = LOCAL
) -> AsyncIterator[McpSources]:
    mcp = McpSources([server], 30.0, store, policy=policy)
    mcp.start()
    try:
        async with asyncio.timeout(120):
            await mcp.settled()
        yield mcp
    finally:
        await mcp.aclose()


@contextlib.asynccontextmanager
async def connected(server: McpServerSettings, store: InProcessStore) -> AsyncIterator[McpSources]:
    async with started(server, store) as mcp:
        assert mcp.connected() == [server.name]
        yield mcp


def tool(store: InProcessStore, name: str) -> Tool:
    found = store.get_tool(name)
    assert found is not None, (name, sorted(store.names()))
    return found


@pytest.fixture
def http_everything() -> Iterator[str]:
    """server-everything over streamable HTTP on a free port; its endpoint's URL."""
    port = free_port()
    process = subprocess.Popen(
        [node(), str(ENTRY), "streamableHttp"],
        env={"PORT": str(port), "PATH": "/usr/bin:/bin"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    pytest.fail("server-everything did not start over HTTP")
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(10)


async def test_stdio_tools_their_hints_and_calls(store: InProcessStore) -> None:
    server = McpServerSettings(name="everything", command=[node(), str(ENTRY), "stdio"])
    async with connected(server, store) as mcp:
        names = set(store.names())
        assert {
            "everything_echo",
            "everything_get-sum",
            "everything_get-structured-content",
        } <= names
        structured = tool(store, "everything_get-structured-content")
        assert structured.provenance.hints == {
            "readOnlyHint": True,
            "destructiveHint": False,
            "idempotentHint": True,
            "openWorldHint": False,
        }
        assert structured.response_schema is not None
        assert await mcp.invoke(tool(store, "everything_get-sum"), {"a": 2, "b": 3}) == (
            "The sum of 2 and 3 is 5."
        )
        weather = await mcp.invoke(structured, {"location": "Chicago"})
        assert isinstance(weather, dict)
        assert weather["temperature"] == 36


async def test_arguments_the_server_refuses_are_a_tool_error_in_its_words(
    store: InProcessStore,
) -> None:
    server = McpServerSettings(name="everything", command=[node(), str(ENTRY), "stdio"])
    async with connected(server, store) as mcp:
        get_sum = tool(store, "everything_get-sum")
        with pytest.raises(ToolError, match="Invalid arguments for tool get-sum") as refused:
            await mcp.invoke(get_sum, {"a": "two"})
        assert refused.value.param == "everything/get-sum"
        assert await mcp.invoke(get_sum, {"a": 1, "b": 1}) == "The sum of 1 and 1 is 2."


async def test_a_long_call_past_its_timeout_leaves_the_session_usable(
    store: InProcessStore,
) -> None:
    server = McpServerSettings(
        name="everything", command=[node(), str(ENTRY), "stdio"], call_timeout=1.0
    )
    async with connected(server, store) as mcp:
        long = tool(store, "everything_trigger-long-running-operation")
        with pytest.raises(ToolTimeout):
            await mcp.invoke(long, {"duration": 30, "steps": 3})
        echo = await mcp.invoke(tool(store, "everything_echo"), {"message": "still here"})
        assert echo == "Echo: still here"


async def test_streamable_http(http_everything: str, store: InProcessStore) -> None:
    server = McpServerSettings(name="remote", url=http_everything)
    async with connected(server, store) as mcp:
        echo = await mcp.invoke(tool(store, "remote_echo"), {"message": "over HTTP"})
        assert echo == "Echo: over HTTP"


@pytest.mark.parametrize(
    ("policy", "reason"),
    [
        (EgressPolicy(), "non-public address"),
        (EgressPolicy(["tools.example.com"], allow_private=True), "allow-list"),
    ],
)
async def test_an_http_server_outside_the_egress_policy_is_never_reached(
    http_everything: str,
    store: InProcessStore,
    policy: EgressPolicy,
    reason: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = McpServerSettings(name="remote", url=http_everything)
    async with started(server, store, policy) as mcp:
        assert mcp.connected() == []
        assert store.names() == {}
    refusals = [r.getMessage() for r in caplog.records if "egress policy" in r.getMessage()]
    assert refusals, [r.getMessage() for r in caplog.records]
    assert reason in refusals[0]


async def test_a_calls_progress_goes_to_the_requests_reporter(store: InProcessStore) -> None:
    server = McpServerSettings(name="everything", command=[node(), str(ENTRY), "stdio"])
    heard: list[str] = []
    async with connected(server, store) as mcp:
        long = tool(store, "everything_trigger-long-running-operation")
        with reported_to(heard.append):
            await mcp.invoke(long, {"duration": 1, "steps": 2})
        await mcp.invoke(long, {"duration": 1, "steps": 2})  # no reporter: nothing heard
    label = "everything/trigger-long-running-operation"
    assert heard == [f"{label}: 1/2", f"{label}: 2/2"]  # one notification a step, in order


def test_progress_is_streamed_as_orchestrate_progress(
    start_proxy: StartProxy, brain: Brain
) -> None:
    everything = McpServerSettings(name="everything", command=[node(), str(ENTRY), "stdio"])
    proxy = start_proxy(
        mcp_servers=[everything.model_dump()],
        planner={"policy": "llm", "top_k": 20, "memory_k": 0},
        orchestrate={"gate": False},
    )
    wait_connected(proxy)
    # Its parameters are all optional: no arguments are written, its defaults run (5 steps).
    brain.one_step(
        "Run the long operation", "long operation", "everything_trigger-long-running-operation", {}
    )
    with sdk(proxy).chat.completions.with_streaming_response.create(
        model="fake-model",
        messages=user("Run the long operation."),
        stream=True,
        extra_body=PROGRESS,
    ) as response:
        _, reasoning, _ = stream_parts(response.parse())
    lines = reasoning.splitlines()
    steps = [
        line for line in lines if line.startswith("everything/trigger-long-running-operation:")
    ]
    assert steps == [f"everything/trigger-long-running-operation: {n}/5" for n in range(1, 6)]
    assert lines.index(steps[-1]) < lines.index("answering…")
