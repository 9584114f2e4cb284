"""The LLM policy as a whole against the fake upstream: a plan walked end to end, the
graph policy and degradation to it, the profiles, stage timing, and memory written only
after a successful run. Each stage has its own file: test_decompose, test_search and
test_triage."""

from __future__ import annotations

import asyncio

from prometheus_client import REGISTRY
from qdrant_client import QdrantClient

from proxy.config import PlannerSettings
from proxy.execute.plan import PlanNode
from proxy.execute.scheduler import CallRecord, Outcome, PlanRun
from proxy.llm import UpstreamModel
from proxy.plan.candidates import CandidateFinder
from proxy.plan.memory import PlanMemory
from proxy.plan.model import Plan
from proxy.plan.planner import RequestPlanner
from proxy.plan.policy import embed_subtasks
from retriever.embedder import Encoder
from retriever.owned_client import OwnedClient
from testing.fake_upstream import FakeUpstream, Script
from tests.plan._llm_policy import REQUEST, STEPS, pick, planner, prompts, reply


async def test_a_valid_plan_is_walked_with_one_pick_per_step(
    upstream: FakeUpstream, model: UpstreamModel, finder: CandidateFinder, encoder: Encoder
) -> None:
    upstream.enqueue(reply(STEPS), pick(1), pick(1), pick(1))
    plan = await planner(finder, encoder).plan(REQUEST, model)
    assert plan.choices == {"s1": "flight_search", "s2": "book_flight", "s3": "send_sms"}
    assert plan.llm_calls == 4
    assert plan.notes == []
    pick_prompt = prompts(upstream)[3]
    assert "0. none of these fits" in pick_prompt
    assert "pick s2: book_flight: fits" in pick_prompt  # short-term memory: path and reasons
    assert "[SEQUENTIAL from the earlier tool]" in pick_prompt
    # every planner prompt wants one JSON object: JSON mode is asked for each time
    assert all(r.body["response_format"] == {"type": "json_object"} for r in upstream.requests)


async def test_the_graph_policy_asks_the_model_nothing(
    upstream: FakeUpstream, model: UpstreamModel, finder: CandidateFinder, encoder: Encoder
) -> None:
    plan = await planner(finder, encoder, policy="graph").plan(REQUEST, model)
    assert upstream.requests == []
    assert plan.notes == ["configured policy: graph"]
    assert plan.llm_calls == 0
    assert len(plan.choices) == 1


async def test_an_unreachable_model_degrades_and_says_why(
    upstream: FakeUpstream, model: UpstreamModel, finder: CandidateFinder, encoder: Encoder
) -> None:
    upstream.enqueue(Script(status=500, error={"message": "boom", "type": "server_error"}))
    plan = await planner(finder, encoder, decompose_retries=0).plan(REQUEST, model)
    assert plan.policy == "graph"
    assert "fell back to the LLM-free policy" in plan.notes[0]
    assert plan.choices


async def test_the_shipped_profile_triages_and_a_routes_full_profile_decomposes(
    upstream: FakeUpstream, model: UpstreamModel, finder: CandidateFinder, encoder: Encoder
) -> None:
    """One planner, two routed models: the default (`small`) asks the triage first,
    a route's `full` decomposes at once and asks every pick."""
    subject = RequestPlanner(finder, encoder, PlannerSettings(top_k=3, memory_k=0))
    upstream.enqueue(reply("none"))
    small = await subject.plan("Thanks, that helps!", model)
    assert small.no_tools
    assert small.notes == ["triage: no tool needed"]
    upstream.enqueue(reply(STEPS), pick(1), pick(1), pick(1))
    full = await subject.plan(REQUEST, model, profile="full")
    assert full.choices == {"s1": "flight_search", "s2": "book_flight", "s3": "send_sms"}
    assert full.llm_calls == 5  # the decomposition, three asked picks, a reflection
    systems = [r.body["messages"][0]["content"] for r in upstream.requests[1:]]
    assert "You plan how to answer" in systems[0]  # no triage first
    assert "You check a plan" in systems[-1]


def stage_count(stage: str) -> float:
    return (
        REGISTRY.get_sample_value("toolgraph_stage_duration_seconds_count", {"stage": stage}) or 0.0
    )


async def test_each_stage_is_timed(
    upstream: FakeUpstream, model: UpstreamModel, finder: CandidateFinder, encoder: Encoder
) -> None:
    before = stage_count("decompose"), stage_count("select")
    upstream.enqueue(reply(STEPS), pick(1), pick(1), pick(1))
    await planner(finder, encoder).plan(REQUEST, model)
    assert (stage_count("decompose"), stage_count("select")) == (before[0] + 1, before[1] + 1)


def run_of(plan: Plan, outcome: Outcome) -> PlanRun:
    records = {
        task_id: CallRecord(PlanNode(id=task_id, tool=tool), outcome=outcome)
        for task_id, tool in plan.choices.items()
    }
    return PlanRun(records)


async def test_memory_is_written_only_after_a_successful_run_and_shown_later(
    upstream: FakeUpstream, model: UpstreamModel, finder: CandidateFinder, encoder: Encoder
) -> None:
    client = OwnedClient(QdrantClient(location=":memory:"))
    memory = PlanMemory(client, "mem", encoder.dim)
    await asyncio.to_thread(memory.create)
    upstream.enqueue(reply(STEPS), pick(1), pick(1), pick(1))
    subject = RequestPlanner(
        finder,
        encoder,
        PlannerSettings(profile="full", top_k=3, reflection_rounds=0, memory_k=2),
        memory,
    )
    plan = await subject.plan(REQUEST, model, "client-a")
    vectors = embed_subtasks(encoder, plan.subtasks)
    assert await memory.remember(plan, run_of(plan, Outcome.FAILED), vectors, "client-a") == 0
    assert await memory.count() == 0
    assert await memory.remember(plan, run_of(plan, Outcome.OK), vectors, "client-a") == 3
    found = await memory.recall([vectors["s3"]], 1, "client-a")
    assert found == {"send my wife a text message": ["flight_search", "book_flight", "send_sms"]}
    assert await memory.recall([vectors["s3"]], 1, "client-b") == {}
    upstream.reset()
    upstream.enqueue(reply(STEPS), pick(1), pick(1), pick(1))
    await subject.plan(REQUEST, model, "client-a")
    assert "A past success" in prompts(upstream)[1]
    upstream.reset()
    upstream.enqueue(reply(STEPS), pick(1), pick(1), pick(1))
    await subject.plan(REQUEST, model, "client-b")
    assert "A past success" not in prompts(upstream)[1]
    await asyncio.to_thread(client.close)
