"""The scheduler against real async tools that sleep, fail and hang."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import pytest
from prometheus_client import REGISTRY
from pydantic import JsonValue, ValidationError

from proxy.config import ExecutorSettings
from proxy.execute.plan import Binding, PlanNode, ToolPlan
from proxy.execute.scheduler import CallRecord, Outcome, Scheduler


class Tools:
    """Tools whose behaviour the node's arguments script: sleep, fail, hang, return."""

    def __init__(self) -> None:
        self.running: dict[str, int] = {}
        self.peak: dict[str, int] = {}
        self.cancelled: list[str] = []
        self.started: dict[str, asyncio.Event] = {}
        self.finished: dict[str, asyncio.Event] = {}
        self.seen: dict[str, dict[str, JsonValue]] = {}

    def host(self, node: PlanNode) -> str:
        return str(node.arguments.get("host", "local"))

    def started_event(self, node_id: str) -> asyncio.Event:
        return self.started.setdefault(node_id, asyncio.Event())

    def finished_event(self, node_id: str) -> asyncio.Event:
        return self.finished.setdefault(node_id, asyncio.Event())

    async def run(
        self, node: PlanNode, arguments: dict[str, JsonValue], context: Mapping[str, JsonValue]
    ) -> JsonValue:
        self.seen[node.id] = arguments
        host = self.host(node)
        for key in (host, "*"):
            self.running[key] = self.running.get(key, 0) + 1
            self.peak[key] = max(self.peak.get(key, 0), self.running[key])
        self.started_event(node.id).set()
        try:
            if arguments.get("hang"):
                await asyncio.Event().wait()
            # Waiting on another call makes an order a condition, not a race: a scheduler
            # that held this call back until the other began or ended would deadlock here.
            if isinstance(until_started := arguments.get("until_started"), str):
                await self.started_event(until_started).wait()
            if isinstance(until_finished := arguments.get("until_finished"), str):
                await self.finished_event(until_finished).wait()
            sleep = arguments.get("sleep", 0.0)
            assert isinstance(sleep, int | float)
            await asyncio.sleep(sleep)
            if arguments.get("fail"):
                raise RuntimeError(f"{node.id} broke")
            self.finished_event(node.id).set()
            return {"from": node.id, "items": [{"id": f"{node.id}-1"}]}
        except asyncio.CancelledError:
            self.cancelled.append(node.id)
            raise
        finally:
            for key in (host, "*"):
                self.running[key] -= 1


def node(node_id: str, *needs: str, **arguments: JsonValue) -> PlanNode:
    return PlanNode(id=node_id, tool=f"tool_{node_id}", needs=needs, arguments=arguments)


def span(record: CallRecord) -> tuple[float, float]:
    """When the call started and finished; both must have happened."""
    assert record.started is not None
    assert record.finished is not None
    return record.started, record.finished


def limits(**overrides: object) -> ExecutorSettings:
    values: dict[str, object] = {"call_timeout": 5.0, "deadline": 10.0}
    values.update(overrides)
    return ExecutorSettings.model_validate(values)


async def test_a_call_starts_when_its_own_inputs_exist_not_when_a_level_ends() -> None:
    # a → c; b is on a's "level" and ends only once c has: a scheduler that ran level
    # by level would hold c back until b ended, and b would time out waiting for c.
    plan = ToolPlan(
        nodes=(node("a", sleep=0.05), node("b", until_finished="c"), node("c", "a", sleep=0.05))
    )
    run = await Scheduler(limits(call_timeout=30.0, deadline=60.0)).execute(plan, Tools())
    (_, a_end), (_, b_end), (c_start, c_end) = (span(run.records[i]) for i in "abc")
    assert run.ok
    assert c_start >= a_end
    assert c_end <= b_end


async def test_a_diamond_waits_for_both_branches_and_runs_them_in_parallel() -> None:
    plan = ToolPlan(
        nodes=(
            node("root", sleep=0.05),
            # Each branch ends only once the other has begun: run one after the other,
            # they would time out.
            node("left", "root", until_started="right"),
            node("right", "root", until_started="left"),
            node("join", "left", "right"),
        )
    )
    run = await Scheduler(limits(call_timeout=30.0, deadline=60.0)).execute(plan, Tools())
    (left_start, left_end), (right_start, right_end), (join_start, _) = (
        span(run.records[i]) for i in ("left", "right", "join")
    )
    assert run.ok
    assert join_start >= max(left_end, right_end)
    assert max(left_start, right_start) <= min(left_end, right_end)  # they overlapped


def tool_calls(tool: str, outcome: Outcome) -> float:
    return (
        REGISTRY.get_sample_value("toolgraph_tool_calls_total", {"tool": tool, "outcome": outcome})
        or 0.0
    )


async def test_a_failed_call_fails_only_its_dependents() -> None:
    plan = ToolPlan(
        nodes=(
            node("a", fail=True),
            node("b", sleep=0.1),
            node("c", "a"),
            node("d", "c", "b"),
            node("e", "b"),
        )
    )
    tools = Tools()
    before = {
        (t, o): tool_calls(t, o)
        for t, o in (
            ("tool_a", Outcome.FAILED),
            ("tool_d", Outcome.SKIPPED),
            ("tool_e", Outcome.OK),
        )
    }
    run = await Scheduler(limits()).execute(plan, tools)
    for (tool, outcome), count in before.items():
        assert tool_calls(tool, outcome) == count + 1
    outcomes = {i: r.outcome for i, r in run.records.items()}
    assert outcomes == {
        "a": Outcome.FAILED,
        "b": Outcome.OK,
        "c": Outcome.SKIPPED,
        "d": Outcome.SKIPPED,
        "e": Outcome.OK,
    }
    assert "RuntimeError: a broke" in run.records["a"].error
    assert run.records["c"].error == "needs a, which did not succeed"
    assert "c" not in tools.seen
    assert "d" not in tools.seen
    assert run.unfinished() == [
        "a (tool_a): failed: RuntimeError: a broke",
        "c (tool_c): skipped: needs a, which did not succeed",
        "d (tool_d): skipped: needs c, which did not succeed",
    ]


async def test_a_hanging_call_times_out_alone() -> None:
    plan = ToolPlan(
        nodes=(
            PlanNode(id="slow", tool="hang", arguments={"hang": True}, timeout=0.2),
            node("after", "slow"),
            node("other", sleep=0.05),
        )
    )
    tools = Tools()
    run = await Scheduler(limits()).execute(plan, tools)
    assert run.records["slow"].outcome is Outcome.TIMEOUT
    assert run.records["slow"].error == "no result within 0.2s"
    assert run.records["after"].outcome is Outcome.SKIPPED
    assert run.records["other"].outcome is Outcome.OK
    assert tools.cancelled == ["slow"]


class WrittenTools(Tools):
    """Tools whose arguments are written first, slowly (an LLM's argument writer)."""

    async def prepare(
        self, node: PlanNode, arguments: dict[str, JsonValue], context: Mapping[str, JsonValue]
    ) -> None:
        await asyncio.sleep(0.3)
        arguments["written"] = True


async def test_writing_the_arguments_is_outside_the_calls_time_window() -> None:
    plan = ToolPlan(nodes=(PlanNode(id="a", tool="t", timeout=0.1),))
    tools = WrittenTools()
    run = await Scheduler(limits()).execute(plan, tools)
    assert run.records["a"].outcome is Outcome.OK
    assert tools.seen["a"] == {"written": True}


async def test_the_deadline_cancels_running_calls_and_skips_the_rest() -> None:
    plan = ToolPlan(
        nodes=(
            node("quick"),
            node("long", sleep=5.0),
            node("later", "long"),
            node("hang", hang=True),
        )
    )
    tools = Tools()
    run = await Scheduler(limits(deadline=0.3)).execute(plan, tools)
    assert run.deadline_exceeded
    assert run.records["quick"].outcome is Outcome.OK
    assert run.records["long"].outcome is Outcome.TIMEOUT
    assert "deadline" in run.records["long"].error
    assert run.records["later"].outcome is Outcome.SKIPPED
    assert sorted(tools.cancelled) == ["hang", "long"]


async def test_cancelling_the_request_reaches_every_running_call() -> None:
    plan = ToolPlan(
        nodes=(node("a", hang=True), node("b", hang=True), node("c", "a"), node("d", sleep=0.01))
    )
    tools = Tools()
    seen: list[tuple[str, Outcome | None]] = []
    d_done = asyncio.Event()

    def observe(record: CallRecord) -> None:
        seen.append((record.node.id, record.outcome))
        if record.node.id == "d" and record.outcome is not None:
            d_done.set()

    # Three calls of one client on one host at once: a limit per client above that.
    scheduler = Scheduler(limits(max_per_client=3))
    task = asyncio.create_task(scheduler.execute(plan, tools, observe))
    await asyncio.wait_for(
        asyncio.gather(
            tools.started_event("a").wait(), tools.started_event("b").wait(), d_done.wait()
        ),
        30,
    )
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert sorted(tools.cancelled) == ["a", "b"]
    assert tools.running["*"] == 0
    assert ("a", Outcome.CANCELLED) in seen
    assert ("b", Outcome.CANCELLED) in seen
    assert ("d", Outcome.OK) in seen
    assert not [t for t in asyncio.all_tasks() if t.get_name().startswith("tool:")]


async def test_the_global_and_per_host_limits_hold() -> None:
    nodes = [node(f"a{i}", sleep=0.1, host="a.example") for i in range(4)]
    nodes += [node(f"b{i}", sleep=0.1, host="b.example") for i in range(4)]
    tools = Tools()
    run = await Scheduler(limits(max_concurrency=3, max_per_host=2)).execute(
        ToolPlan(nodes=tuple(nodes)), tools
    )
    assert run.ok
    assert tools.peak["*"] == 3
    assert tools.peak["a.example"] <= 2
    assert tools.peak["b.example"] <= 2
    assert run.wall < 8 * 0.1  # still parallel


async def test_a_host_at_its_limit_does_not_hold_global_slots() -> None:
    # Two global slots; "busy" allows one call at a time. Calls waiting for "busy"
    # must leave the second global slot to the call for "free".
    nodes = [node(f"busy{i}", sleep=0.2, host="busy") for i in range(3)]
    nodes.append(node("free", sleep=0.01, host="free"))
    run = await Scheduler(limits(max_concurrency=2, max_per_host=1)).execute(
        ToolPlan(nodes=tuple(nodes)), Tools()
    )
    _, free_end = span(run.records["free"])
    assert free_end < 0.2


async def test_one_clients_calls_leave_slots_to_another_client() -> None:
    # Client a's four calls hang on host "local" (four slots, two per client); the
    # call of client b must run while they hang, not after.
    tools = Tools()
    scheduler = Scheduler(limits(max_per_host=4, max_per_client=2, call_timeout=60, deadline=60))
    hanging = ToolPlan(nodes=tuple(node(f"a{i}", hang=True) for i in range(4)))
    hog = asyncio.create_task(scheduler.execute(hanging, tools, client="a"))
    try:
        async with asyncio.timeout(30):
            await tools.started_event("a0").wait()
            await tools.started_event("a1").wait()
            run = await scheduler.execute(ToolPlan(nodes=(node("b"),)), tools, client="b")
        assert run.ok
        assert not hog.done()
        assert not tools.started_event("a2").is_set()  # a's own limit, not b's slot
        assert tools.peak["local"] == 3
    finally:
        hog.cancel()
        with pytest.raises(asyncio.CancelledError):
            await hog


async def test_the_per_client_limits_are_forgotten_when_their_calls_end() -> None:
    scheduler = Scheduler(limits())
    plan = ToolPlan(nodes=(node("a", sleep=0), node("b", "a", fail=True), node("c", "b")))
    runs = await asyncio.gather(
        *(scheduler.execute(plan, Tools(), client=f"client-{i}") for i in range(50))
    )
    assert [run.records["a"].outcome for run in runs] == [Outcome.OK] * 50
    assert scheduler.clients_busy == 0


async def test_outputs_feed_inputs_through_bindings() -> None:
    plan = ToolPlan(
        nodes=(
            node("find"),
            PlanNode(
                id="use",
                tool="use",
                inputs=(Binding(source="find", path="items.0.id", target="hotel_id"),),
                arguments={"sleep": 0},
            ),
            PlanNode(
                id="bad",
                tool="bad",
                inputs=(Binding(source="find", path="items.5.id", target="hotel_id"),),
            ),
        )
    )
    tools = Tools()
    run = await Scheduler(limits()).execute(plan, tools)
    assert tools.seen["use"] == {"sleep": 0, "hotel_id": "find-1"}
    assert run.records["use"].arguments == {"sleep": 0, "hotel_id": "find-1"}
    assert run.records["bad"].outcome is Outcome.FAILED
    assert "input hotel_id from find" in run.records["bad"].error
    assert run.outputs()["find"] == {"from": "find", "items": [{"id": "find-1"}]}


@pytest.mark.parametrize(
    ("nodes", "message"),
    [
        ((node("a", "a"),), "depends on itself"),
        ((node("a", "b"),), "unknown node b"),
        ((node("a", "b"), node("b", "a")), "cycle"),
        ((node("a"), node("a")), "duplicate node ids: a"),
    ],
)
def test_a_bad_plan_is_refused(nodes: tuple[PlanNode, ...], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        ToolPlan(nodes=nodes)


def test_the_critical_path_is_the_longest_chain() -> None:
    plan = ToolPlan(nodes=(node("a"), node("b", "a"), node("c"), node("d", "b", "c")))
    assert plan.critical_path({"a": 1, "b": 2, "c": 4, "d": 1}) == 5


def test_the_lineage_is_every_ancestor_in_topological_order() -> None:
    plan = ToolPlan(
        nodes=(node("d", "b", "c"), node("b", "a"), node("c"), node("a"), node("e", "d"))
    )
    lineage = plan.lineage()
    assert lineage["a"] == lineage["c"] == ()
    assert lineage["b"] == ("a",)
    assert set(lineage["e"]) == {"a", "b", "c", "d"}
    order = [n.id for n in plan.topological_order()]
    assert list(lineage["e"]) == sorted(lineage["e"], key=order.index)


async def test_a_binding_into_an_object_leaves_the_plan_untouched() -> None:
    user = PlanNode(
        id="use",
        tool="use",
        arguments={"variables": {"a": 1}},
        inputs=(Binding(source="find", path="items.0.id", target="variables.b"),),
    )
    plan = ToolPlan(nodes=(node("find"), user))
    tools = Tools()
    await Scheduler(limits()).execute(plan, tools)
    assert tools.seen["use"] == {"variables": {"a": 1, "b": "find-1"}}
    assert user.arguments == {"variables": {"a": 1}}
