"""The executor as the app will hold it, from settings to compressed results."""

from __future__ import annotations

import asyncio
import json
import os
import signal

import pytest

from eval.fake_upstream import FakeUpstream, Script
from graph_store.models import Endpoint, Provenance, Tool
from proxy.config import Executor
from proxy.execute.egress import EgressPolicy
from proxy.execute.invocation import make_http_client
from proxy.execute.plan import Binding, PlanNode, ToolPlan
from proxy.execute.scheduler import CallRecord, Outcome
from proxy.execute.service import ToolExecutor
from proxy.llm import UpstreamModel
from proxy.tools.catalog import builtin_tools
from tests.tools.test_sandbox import children


def prompt_of(request: object) -> str:
    body = getattr(request, "body", {})
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
    executor = ToolExecutor(Executor(sandbox_timeout=5, compress_chars=200))
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


async def test_a_shared_client_stays_open_for_its_owner() -> None:
    settings = Executor()
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
    executor = ToolExecutor(Executor(sandbox_timeout=300, call_timeout=300, deadline=300))
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
    """Stop the fork server's children once ``count`` of them run; their pids."""
    for _ in range(3000):  # a minute
        running = children(server)
        if len(running) >= count:
            break
        await asyncio.sleep(0.02)
    for pid in running:
        os.kill(pid, signal.SIGSTOP)
    return running
