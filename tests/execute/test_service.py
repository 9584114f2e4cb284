"""The executor as the app will hold it, from settings to compressed results."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from typing import Any

import pytest
from prometheus_client import REGISTRY

from graph_store.models import Endpoint, Provenance, Tool
from proxy.config import ExecutorSettings
from proxy.execute.compress import serialize
from proxy.execute.egress import EgressPolicy
from proxy.execute.invocation import make_http_client
from proxy.execute.plan import Binding, PlanNode, ToolPlan
from proxy.execute.runner import InFlight
from proxy.execute.scheduler import CallRecord, Outcome
from proxy.execute.service import ToolExecutor
from proxy.llm import UpstreamModel
from proxy.tools.packs.math.catalog import builtin_tools
from testing.fake_upstream import FakeUpstream, Script
from tests.execute.tool_server import serve_tools
from tests.tools.test_sandbox import capped, children


def prompt_of(request: object) -> str:
    return messages_of(getattr(request, "body", {}))


def messages_of(body: Any) -> str:
    return "\n".join(m["content"] for m in body["messages"])


def metadata_tool(url: str) -> Tool:
    return Tool(
        id="test/instance_identity",
        name="instance_identity",
        original_name="instance_identity",
        endpoint=Endpoint(method="GET", url=url),
        provenance=Provenance(format="test"),
    )


async def test_a_plan_runs_from_settings_to_compressed_results(
    upstream: FakeUpstream, model: UpstreamModel
) -> None:
    executor = ToolExecutor(ExecutorSettings(sandbox_timeout=5, compress_chars=200))
    tools = {tool.name: tool for tool in builtin_tools()}
    tools["steal"] = metadata_tool("http://169.254.169.254/latest/meta-data/iam/")
    tools["local"] = metadata_tool("http://127.0.0.1:6379/")
    plan = ToolPlan(
        nodes=(
            PlanNode(
                id="field",
                tool="run_simulation",
                task="laplace",
                arguments={"sim_type": "laplace2d", "params": {"nx": 21, "top": 1}},
            ),
            PlanNode(
                id="centre",
                tool="evaluate_expression",
                task="Twice the centre potential",
                inputs=(Binding(source="field", path="center", target="variables.v"),),
            ),
            PlanNode(id="steal", tool="steal", feeds_answer=False),
            PlanNode(id="local", tool="local"),
        )
    )
    upstream.enqueue(
        Script(text=json.dumps({"keep": ["center", "converged"]})),  # fields of run_simulation
        Script(text=json.dumps({"expression": "2*v"})),  # arguments of "centre"
    )
    events: list[tuple[str, Outcome | None]] = []

    def observe(record: CallRecord) -> None:
        events.append((record.node.id, record.outcome))

    try:
        done = await executor.execute(plan, tools, model, observe)
    finally:
        await executor.aclose()
    run = done.run
    assert run.records["centre"].arguments == {
        "expression": "2*v",
        "variables": {"v": pytest.approx(0.25, abs=0.01)},
    }
    assert json.loads(done.compressed["centre"].text)["value"] == pytest.approx(0.5, abs=0.02)
    field = done.compressed["field"]
    assert field.raw_chars > 200
    assert field.method == "fields"
    assert json.loads(field.text) == {"center": pytest.approx(0.25, abs=0.01), "converged": True}
    assert '"center":' in prompt_of(upstream.requests[1])  # the writer saw the compressed output
    assert "sample_rows" not in prompt_of(upstream.requests[1])
    assert len(upstream.requests) == 2
    for ssrf in ("steal", "local"):
        assert run.records[ssrf].outcome is Outcome.FAILED
        assert "non-public address" in run.records[ssrf].error
    assert set(done.answer_inputs()) == {"field", "centre"}
    assert ("centre", None) in events
    assert ("centre", Outcome.OK) in events


def response_bytes(stage: str) -> float:
    sample = REGISTRY.get_sample_value("toolgraph_tool_response_bytes_total", {"stage": stage})
    return sample or 0.0


LAPLACE = PlanNode(
    id="field",
    tool="run_simulation",
    task="laplace",
    arguments={"sim_type": "laplace2d", "params": {"nx": 21, "top": 1}},
)
KEEP_CENTRE = Script(text=json.dumps({"keep": ["center", "converged"]}))


def asks_for_fields(body: Any) -> bool:
    """Whether an upstream request asks for a tool's field list (``prompts/select_fields.md``)."""
    return "Fields of its response" in messages_of(body)


async def test_an_output_that_feeds_another_call_is_compressed_and_counted_once(
    upstream: FakeUpstream, model: UpstreamModel
) -> None:
    executor = ToolExecutor(ExecutorSettings(sandbox_timeout=5, compress_chars=200))
    tools = {tool.name: tool for tool in builtin_tools()}
    plan = ToolPlan(
        nodes=(
            LAPLACE,
            PlanNode(
                id="centre",
                tool="evaluate_expression",
                task="Twice the centre potential",
                inputs=(Binding(source="field", path="center", target="variables.v"),),
            ),
        )
    )
    upstream.enqueue(KEEP_CENTRE, Script(text=json.dumps({"expression": "2*v"})))
    raw, compressed = response_bytes("raw"), response_bytes("compressed")
    try:
        done = await executor.execute(plan, tools, model)
    finally:
        await executor.aclose()
    assert done.run.ok, done.run.unfinished()
    outputs = done.run.outputs()
    assert set(done.compressed) == set(outputs) == {"field", "centre"}
    assert response_bytes("raw") - raw == sum(
        len(serialize(output).encode()) for output in outputs.values()
    )
    assert response_bytes("compressed") - compressed == sum(
        len(result.text.encode()) for result in done.compressed.values()
    )
    assert done.compressed["field"].method == "fields"


async def test_a_call_is_compressed_as_it_finishes_while_others_still_run(
    upstream: FakeUpstream, model: UpstreamModel
) -> None:
    # The gate's call ends only once run_simulation's field list is asked for: with
    # compression after the whole plan, it would wait for its own timeout instead.
    loop = asyncio.get_running_loop()
    async with serve_tools() as server:

        def open_gate(body: dict[str, Any]) -> Script | None:
            if not asks_for_fields(body):
                return None
            loop.call_soon_threadsafe(server.gate.set)
            return KEEP_CENTRE

        upstream.responder = open_gate
        settings = ExecutorSettings(
            sandbox_timeout=5,
            compress_chars=200,
            call_timeout=60,
            deadline=120,
            allowed_hosts=["127.0.0.1"],
            allow_private_networks=True,
        )
        executor = ToolExecutor(settings)
        tools = {tool.name: tool for tool in builtin_tools()}
        tools["gate"] = metadata_tool(f"{server.url}/gate")
        plan = ToolPlan(nodes=(LAPLACE, PlanNode(id="gate", tool="gate")))
        try:
            done = await executor.execute(plan, tools, model)
        finally:
            await executor.aclose()
    assert done.run.ok, done.run.unfinished()
    assert done.run.outputs()["gate"] == {"opened": True}
    assert done.compressed["field"].method == "fields"
    assert len(upstream.requests) == 1


async def test_a_field_choice_that_overruns_keeps_the_output_truncated(
    upstream: FakeUpstream, model: UpstreamModel
) -> None:
    executor = ToolExecutor(ExecutorSettings(sandbox_timeout=5, compress_chars=200, call_timeout=5))
    tools = {tool.name: tool for tool in builtin_tools()}
    upstream.enqueue(Script(hang=True))  # the field list never comes
    try:
        await executor.sandbox.start()
        async with asyncio.timeout(60):  # the upstream's own read timeout is 300 s
            done = await executor.execute(ToolPlan(nodes=(LAPLACE,)), tools, model)
    finally:
        await executor.aclose()
    record = done.run.records["field"]
    assert record.outcome is Outcome.OK, record.describe()
    assert asks_for_fields(upstream.requests[0].body)  # the model was asked, and never answered
    compressed = done.compressed["field"]
    assert compressed.method == "truncate"
    assert len(compressed.text) <= 200 < compressed.raw_chars


async def test_a_shared_client_stays_open_for_its_owner() -> None:
    settings = ExecutorSettings()
    async with make_http_client(EgressPolicy.from_settings(settings), settings) as client:
        executor = ToolExecutor(settings, client=client)
        await executor.aclose()
        assert not client.is_closed
    own = ToolExecutor(settings)
    await own.aclose()
    assert own.sandbox.running is False


async def test_one_clients_expensive_builtin_calls_leave_room_for_another() -> None:
    # Client a's calls are stopped (SIGSTOP) once their children run, so they hold
    # their sandbox slots for as long as the test needs; b's cheap call must be
    # answered while they do. Timeouts no load reaches: the test cancels a's calls.
    executor = ToolExecutor(ExecutorSettings(sandbox_timeout=300, call_timeout=300, deadline=300))
    tools = {tool.name: tool for tool in builtin_tools()}
    await executor.sandbox.start()
    heavy = ToolPlan(
        nodes=(
            PlanNode(
                id="big", tool="evaluate_expression", arguments={"expression": "factorial(10**8)"}
            ),
        )
    )
    cheap = ToolPlan(
        nodes=(
            PlanNode(id="small", tool="evaluate_expression", arguments={"expression": "2*pi*50"}),
        )
    )
    started: list[str] = []

    def observe(record: CallRecord) -> None:
        if record.outcome is None:
            started.append(record.node.id)

    hogs = [
        asyncio.create_task(executor.execute(heavy, tools, None, observe, client="a"))
        for _ in range(4)
    ]
    try:
        stopped = await stop_children(executor.sandbox.server_pid, executor.settings.max_per_client)
        async with asyncio.timeout(60):
            done = await executor.execute(cheap, tools, None, client="b")
        assert done.run.ok, done.run.unfinished()
        assert json.loads(done.compressed["small"].text)["value"] == pytest.approx(314.159, 1e-4)
        assert not [hog for hog in hogs if hog.done()]
        assert len(started) == len(stopped) == 2  # a's other calls wait for a's own slots
    finally:
        for hog in hogs:
            hog.cancel()
        await asyncio.gather(*hogs, return_exceptions=True)
        await executor.aclose()


async def stop_children(server: int | None, count: int) -> list[int]:
    """Stop the fork server's children once ``count`` of them run a call (the spare that
    waits for the next one is left alone); their pids."""
    for _ in range(3000):  # a minute
        running = [pid for pid in children(server) if capped(pid)]
        if len(running) >= count:
            break
        await asyncio.sleep(0.02)
    for pid in running:
        os.kill(pid, signal.SIGSTOP)
    return running


def test_overlapping_calls_count_once_in_the_tools_time() -> None:
    now = [0.0]
    tools = InFlight(clock=lambda: now[0])
    with tools.interval():  # 0 → 5, with a second call 1 → 3 beside it
        now[0] = 1.0
        with tools.interval():
            now[0] = 3.0
        now[0] = 5.0
    now[0] = 7.0
    with tools.interval():  # 7 → 8
        now[0] = 8.0
    assert tools.seconds == 6.0  # not 8: the calls' union, not their sum
