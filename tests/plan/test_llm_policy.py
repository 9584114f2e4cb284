"""The LLM policy against the fake upstream: decomposition, DFS picks, reflection,
budgets, degradation, and memory written only after a successful run."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from prometheus_client import REGISTRY
from qdrant_client import QdrantClient

from proxy.config import PlannerSettings
from proxy.execute.plan import PlanNode
from proxy.execute.scheduler import CallRecord, Outcome, PlanRun
from proxy.llm import UpstreamModel
from proxy.plan.candidates import CandidateFinder
from proxy.plan.memory import PlanMemory
from proxy.plan.model import Plan
from proxy.plan.planner import UNTRIAGED, RequestPlanner
from proxy.plan.policy import embed_subtasks
from retriever.embedder import Encoder
from retriever.owned_client import OwnedClient
from testing.fake_upstream import FakeUpstream, Script

REQUEST = "Find a flight from Beijing to Paris, book it for Li Lei and text my wife."
STEPS = {
    "subtasks": [
        {
            "id": "s1",
            "text": "find flights from Beijing to Paris",
            "category": "travel",
            "needs": [],
        },
        {
            "id": "s2",
            "text": "book a seat on the flight for Li Lei",
            "category": "travel",
            "needs": ["s1"],
        },
        {"id": "s3", "text": "send my wife a text message", "category": "travel", "needs": ["s2"]},
    ]
}


def reply(value: object) -> Script:
    return Script(text=value if isinstance(value, str) else json.dumps(value))


def pick(n: int, why: str = "fits") -> Script:
    return reply({"choice": n, "reason": why})


def planner(finder: CandidateFinder, encoder: Encoder, **config: Any) -> RequestPlanner:
    values: dict[str, Any] = {"profile": "full", "top_k": 3, "reflection_rounds": 0, "memory_k": 0}
    values.update(config)
    return RequestPlanner(finder, encoder, PlannerSettings(**values))


def prompts(upstream: FakeUpstream) -> list[str]:
    return ["\n".join(m["content"] for m in r.body["messages"]) for r in upstream.requests]


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


async def test_a_reason_naming_one_listed_tool_overrides_a_number_pointing_at_another(
    upstream: FakeUpstream, model: UpstreamModel, finder: CandidateFinder, encoder: Encoder
) -> None:
    drifted = pick(2, "flight_search finds the flights")  # candidate 1 is flight_search
    upstream.enqueue(reply(STEPS), drifted, pick(1), pick(1))
    plan = await planner(finder, encoder).plan(REQUEST, model)
    assert plan.choices["s1"] == "flight_search"
    assert "the reason names flight_search" in plan.decisions[0].reason


@pytest.mark.parametrize(
    "why",
    [
        "The flight_search tool is not suitable: the flight is known",
        "flight_search cannot book anything",
        "`flight_search` isn't needed here",
    ],
)
async def test_a_reason_turning_a_listed_tool_down_keeps_the_number(
    upstream: FakeUpstream, model: UpstreamModel, finder: CandidateFinder, encoder: Encoder,
    why: str,
) -> None:  # fmt: skip
    upstream.enqueue(reply(STEPS), pick(2, why), pick(1), pick(1))
    plan = await planner(finder, encoder).plan(REQUEST, model)
    assert plan.choices["s1"] != "flight_search"  # candidate 1; the number said 2
    assert plan.decisions[0].reason == why


async def test_a_reason_naming_no_listed_tool_keeps_the_number(
    upstream: FakeUpstream, model: UpstreamModel, finder: CandidateFinder, encoder: Encoder
) -> None:
    upstream.enqueue(reply(STEPS), pick(1, "it fits"), pick(1), pick(1))
    first = await planner(finder, encoder).plan(REQUEST, model)
    upstream.enqueue(reply(STEPS), pick(1), pick(1), pick(1))
    second = await planner(finder, encoder).plan(REQUEST, model)
    assert first.choices == second.choices


@pytest.mark.parametrize(
    ("asked", "written", "given"),
    [
        pytest.param(
            "Find flight CA 933 from Beijing to Paris and text my wife at 555 0142.",
            ["find the flight to Paris", "text the flight to 555 0142"],
            ["find the flight to Paris (from: {asked})", "text the flight to 555 0142"],
            id="a-number-dropped",
        ),
        pytest.param(
            "Find flight CA 933 from Beijing to Paris and text my wife about it.",
            ["find flight CA 933 to Paris", "text my wife about the flight"],
            ["find flight CA 933 to Paris", "text my wife about the flight"],
            id="every-number-kept",
        ),
    ],
)
async def test_sub_tasks_are_given_the_request_only_when_they_dropped_its_numbers(
    upstream: FakeUpstream, model: UpstreamModel, finder: CandidateFinder, encoder: Encoder,
    asked: str, written: list[str], given: list[str],
) -> None:  # fmt: skip
    """A sub-task carrying none of the request's numbers gets the request appended, but
    only when the decomposition as a whole lost one of them."""
    first, second = written
    decomposition = {
        "subtasks": [
            {"id": "s1", "text": first, "needs": []},
            {"id": "s2", "text": second, "needs": ["s1"]},
        ]
    }
    upstream.enqueue(reply(decomposition), pick(1), pick(1))
    plan = await planner(finder, encoder).plan(asked, model)
    assert [task.text for task in plan.subtasks] == [text.format(asked=asked) for text in given]


@pytest.mark.parametrize(
    ("bad", "feedback"),
    [
        ("sure, here is the plan: s1 then s2", "the answer was not one JSON object"),
        (
            {
                "subtasks": [
                    {"id": "a", "text": "x", "needs": ["b"]},
                    {"id": "b", "text": "y", "needs": ["a"]},
                ]
            },
            "form a cycle",
        ),
        ({"subtasks": [{"id": "a", "text": "x", "needs": ["zz"]}]}, "needs unknown sub-task 'zz'"),
        ({"subtasks": [{"id": "a", "text": "x", "needs": ["a"]}]}, "sub-task a needs itself"),
        ({"subtasks": []}, "the plan has no sub-tasks"),
        (
            {"subtasks": [{"id": "a", "text": "x", "category": "astrology"}]},
            "is not a catalog category",
        ),
    ],
)
async def test_an_invalid_decomposition_is_sent_back_with_its_problem(
    upstream: FakeUpstream, model: UpstreamModel, finder: CandidateFinder, encoder: Encoder,
    bad: object, feedback: str,
) -> None:  # fmt: skip
    upstream.enqueue(reply(bad), reply(STEPS), pick(1), pick(1), pick(1))
    plan = await planner(finder, encoder).plan(REQUEST, model)
    assert feedback in prompts(upstream)[1]
    assert plan.choices["s3"] == "send_sms"
    assert plan.policy == "llm"


async def test_a_category_in_another_case_is_the_catalog_s_without_a_retry(
    upstream: FakeUpstream, model: UpstreamModel, finder: CandidateFinder, encoder: Encoder
) -> None:
    shouted = {"subtasks": [dict(task, category="Travel") for task in STEPS["subtasks"]]}
    upstream.enqueue(reply(shouted), pick(1), pick(1), pick(1))
    plan = await planner(finder, encoder).plan(REQUEST, model)
    assert plan.llm_calls == 4  # the decomposition and three picks: no retry
    assert {task.category for task in plan.subtasks} == {"travel"}


async def test_a_category_outside_the_catalog_in_the_last_answer_only_loses_its_category(
    upstream: FakeUpstream, model: UpstreamModel, finder: CandidateFinder, encoder: Encoder
) -> None:
    astrology = {"subtasks": [dict(task, category="astrology") for task in STEPS["subtasks"]]}
    upstream.enqueue(reply(astrology), reply(astrology), pick(1), pick(1), pick(1))
    plan = await planner(finder, encoder, decompose_retries=1).plan(REQUEST, model)
    assert "is not a catalog category" in prompts(upstream)[1]  # sent back once
    assert plan.policy == "llm"  # the sub-tasks were kept, not the whole-request fallback
    assert [task.id for task in plan.subtasks] == ["s1", "s2", "s3"]
    assert {task.category for task in plan.subtasks} == {None}
    assert plan.choices["s3"] == "send_sms"


async def test_retries_are_bounded_then_the_llm_free_policy_plans(
    upstream: FakeUpstream, model: UpstreamModel, finder: CandidateFinder, encoder: Encoder
) -> None:
    upstream.enqueue(*[reply("no idea")] * 5)
    plan = await planner(finder, encoder, decompose_retries=2).plan(REQUEST, model)
    assert len(upstream.requests) == 3
    assert plan.policy == "graph"
    assert plan.notes[0].startswith("fell back to the LLM-free policy: decomposition failed")
    assert len(plan.choices) == 1  # the whole request as one sub-task


async def test_a_runaway_decomposition_is_not_retried(
    upstream: FakeUpstream, model: UpstreamModel, finder: CandidateFinder, encoder: Encoder
) -> None:
    cut = Script(
        text='{"subtasks": [{"id": "s1", "text": "find flights fro', finish_reason="length"
    )
    upstream.enqueue(cut, reply(STEPS))
    plan = await planner(finder, encoder, decompose_retries=2).plan(REQUEST, model)
    assert len(upstream.requests) == 1  # a reply cut at its bound would be cut again
    assert plan.policy == "graph"
    assert "ran past its 640-token bound" in plan.notes[0]


async def test_an_unreachable_model_degrades_and_says_why(
    upstream: FakeUpstream, model: UpstreamModel, finder: CandidateFinder, encoder: Encoder
) -> None:
    upstream.enqueue(Script(status=500, error={"message": "boom", "type": "server_error"}))
    plan = await planner(finder, encoder, decompose_retries=0).plan(REQUEST, model)
    assert plan.policy == "graph"
    assert "fell back to the LLM-free policy" in plan.notes[0]
    assert plan.choices


async def test_a_request_needing_no_tool_is_recognised(
    upstream: FakeUpstream, model: UpstreamModel, finder: CandidateFinder, encoder: Encoder
) -> None:
    upstream.enqueue(reply({"no_tools": True}))
    plan = await planner(finder, encoder).plan("Hi! How are you?", model)
    assert plan.no_tools
    assert plan.choices == {}
    assert plan.llm_calls == 1


async def test_an_invented_or_out_of_range_choice_never_becomes_a_tool(
    upstream: FakeUpstream, model: UpstreamModel, finder: CandidateFinder, encoder: Encoder
) -> None:
    upstream.enqueue(reply(STEPS), reply({"choice": "teleport"}), pick(99), reply({"choice": 0}))
    plan = await planner(finder, encoder).plan(REQUEST, model)
    names = set(finder.store.names())
    assert set(plan.choices.values()) <= names
    assert "teleport" not in plan.choices.values()
    assert any("named no listed tool" in d.reason for d in plan.decisions)


async def test_none_fits_everywhere_backtracks_within_the_budget(
    upstream: FakeUpstream, model: UpstreamModel, finder: CandidateFinder, encoder: Encoder
) -> None:
    upstream.enqueue(reply(STEPS), pick(1), pick(1), *[pick(0, "nothing sends texts")] * 30)
    plan = await planner(finder, encoder, step_budget=6).plan(REQUEST, model)
    kinds = [d.kind for d in plan.decisions]
    assert "backtrack" in kinds
    # Budget 6: at most 6 picks and backtracks together reach the model.
    assert len(upstream.requests) - 1 <= 6
    backtracked = next(d for d in plan.decisions if d.kind == "backtrack")
    assert backtracked.subtask == "s2"
    assert "fallback" in kinds  # what the budget left undone, the LLM-free policy did
    assert set(plan.choices.values()) <= set(finder.store.names())


async def test_a_budget_of_one_asks_once(
    upstream: FakeUpstream, model: UpstreamModel, finder: CandidateFinder, encoder: Encoder
) -> None:
    upstream.enqueue(reply(STEPS), pick(1))
    plan = await planner(finder, encoder, step_budget=1).plan(REQUEST, model)
    assert len(upstream.requests) == 2
    assert [d.kind for d in plan.decisions] == ["pick", "fallback", "fallback"]
    assert len(plan.choices) == 3


async def test_reflection_success_keeps_the_path(
    upstream: FakeUpstream, model: UpstreamModel, finder: CandidateFinder, encoder: Encoder
) -> None:
    upstream.enqueue(
        reply(STEPS), pick(1), pick(1), pick(1), reply({"verdict": "success", "reason": "ok"})
    )
    plan = await planner(finder, encoder, reflection_rounds=2).plan(REQUEST, model)
    assert len(upstream.requests) == 5
    assert plan.decisions[-1].kind == "reflect"
    assert plan.choices["s2"] == "book_flight"


async def test_reflection_partial_resumes_at_the_first_wrong_step(
    upstream: FakeUpstream, model: UpstreamModel, finder: CandidateFinder, encoder: Encoder
) -> None:
    upstream.enqueue(
        reply(STEPS), pick(1), pick(1), pick(1),
        reply({"verdict": "partial", "first_wrong": "s2", "reason": "booked the wrong thing"}),
        pick(1), pick(1), reply({"verdict": "success"}),
    )  # fmt: skip
    plan = await planner(finder, encoder, reflection_rounds=2).plan(REQUEST, model)
    assert plan.choices["s1"] == "flight_search"  # kept
    assert plan.choices["s2"] != "book_flight"  # the wrong tool is excluded there
    retry = [d for d in plan.decisions if d.subtask == "s2" and d.kind == "pick"][-1]
    assert "book_flight" not in {c.tool for c in retry.candidates}
    assert "booked the wrong thing" in prompts(upstream)[5]  # the lesson is in context


async def test_reflection_failure_drops_the_noisy_start_tools(
    upstream: FakeUpstream, model: UpstreamModel, finder: CandidateFinder, encoder: Encoder
) -> None:
    upstream.enqueue(
        reply(STEPS), pick(1), pick(1), pick(1),
        reply({"verdict": "failure", "noise": ["flight_search"], "reason": "wrong start"}),
        pick(1), pick(1), pick(1), reply({"verdict": "success"}),
    )  # fmt: skip
    plan = await planner(finder, encoder, reflection_rounds=3).plan(REQUEST, model)
    assert plan.choices["s1"] != "flight_search"
    assert all("flight_search" not in {c.tool for c in d.candidates} for d in plan.decisions[4:])


async def test_reflection_rounds_are_bounded(
    upstream: FakeUpstream, model: UpstreamModel, finder: CandidateFinder, encoder: Encoder
) -> None:
    partial = reply({"verdict": "partial", "first_wrong": "s3", "reason": "no"})
    upstream.enqueue(
        reply(STEPS), pick(1), pick(1), pick(1), partial, pick(1), partial, pick(1), partial
    )
    plan = await planner(finder, encoder, reflection_rounds=2, step_budget=50).plan(REQUEST, model)
    assert sum(d.kind == "reflect" for d in plan.decisions) == 2
    # decompose, 3 picks, then twice: a reflection and the search again from s3.
    assert len(upstream.requests) == 8


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


async def test_the_graph_policy_asks_the_model_nothing(
    upstream: FakeUpstream, model: UpstreamModel, finder: CandidateFinder, encoder: Encoder
) -> None:
    plan = await planner(finder, encoder, policy="graph").plan(REQUEST, model)
    assert upstream.requests == []
    assert plan.notes == ["configured policy: graph"]
    assert plan.llm_calls == 0
    assert len(plan.choices) == 1


async def test_triage_none_plans_no_tools_without_a_decomposition(
    upstream: FakeUpstream, model: UpstreamModel, finder: CandidateFinder, encoder: Encoder
) -> None:
    upstream.enqueue(reply("none"))
    plan = await planner(finder, encoder, triage=True).plan("Thanks, that helps!", model)
    assert plan.no_tools
    assert plan.llm_calls == 1
    request = upstream.requests[0].body
    assert "response_format" not in request  # one word, not JSON
    last = request["messages"][-1]
    assert last["role"] == "user"
    assert last["content"].endswith("\nRequest: Thanks, that helps!")
    assert any(m["content"] == "several" for m in request["messages"])  # the worked examples


async def test_triage_sees_the_catalogs_closest_tools_beside_the_request(
    upstream: FakeUpstream, model: UpstreamModel, finder: CandidateFinder, encoder: Encoder
) -> None:
    upstream.enqueue(reply("none"))
    await planner(finder, encoder, triage=True).plan("Find flights to Paris.", model)
    last = upstream.requests[0].body["messages"][-1]["content"]
    tools_line, request_line = last.split("\n")
    assert request_line == "Request: Find flights to Paris."
    shown = tools_line.removeprefix("Closest tools: ").split(" | ")
    assert len(shown) == 3
    assert shown[0].startswith("flight_search: ")  # retrieval's first, with its description


async def test_triage_one_plans_the_request_as_one_sub_task(
    upstream: FakeUpstream, model: UpstreamModel, finder: CandidateFinder, encoder: Encoder
) -> None:
    upstream.enqueue(reply("One."), pick(1))
    plan = await planner(finder, encoder, triage=True).plan("Find flights to Paris.", model)
    assert [task.text for task in plan.subtasks] == ["Find flights to Paris."]
    assert plan.choices == {"s1": "flight_search"}
    assert plan.llm_calls == 2
    assert plan.notes == ["triage: one tool call, planned without a decomposition"]


async def test_a_sure_gate_and_one_clause_skip_the_triage(
    upstream: FakeUpstream, model: UpstreamModel, finder: CandidateFinder, encoder: Encoder
) -> None:
    upstream.enqueue(pick(1))
    plan = await planner(finder, encoder, triage=True).plan(
        "Find flights to Paris.", model, tool_needed=True
    )
    assert plan.choices == {"s1": "flight_search"}
    assert plan.llm_calls == 1  # the pick alone
    assert plan.notes[0] == UNTRIAGED
    assert not any("sort requests" in prompt for prompt in prompts(upstream))


async def test_a_request_of_several_clauses_is_triaged_even_when_the_gate_is_sure(
    upstream: FakeUpstream, model: UpstreamModel, finder: CandidateFinder, encoder: Encoder
) -> None:
    upstream.enqueue(reply("several"), reply(STEPS), pick(1), pick(1), pick(1))
    plan = await planner(finder, encoder, triage=True).plan(REQUEST, model, tool_needed=True)
    assert plan.llm_calls == 5
    assert UNTRIAGED not in plan.notes
    assert "sort requests" in prompts(upstream)[0]


async def test_triage_several_or_anything_else_decomposes(
    upstream: FakeUpstream, model: UpstreamModel, finder: CandidateFinder, encoder: Encoder
) -> None:
    for word in ("several", "maybe two?"):
        upstream.enqueue(reply(word), reply(STEPS), pick(1), pick(1), pick(1))
        plan = await planner(finder, encoder, triage=True).plan(REQUEST, model)
        assert plan.choices == {"s1": "flight_search", "s2": "book_flight", "s3": "send_sms"}
        assert plan.llm_calls == 5


async def test_pick_first_takes_each_first_candidate_without_asking(
    upstream: FakeUpstream, model: UpstreamModel, finder: CandidateFinder, encoder: Encoder
) -> None:
    upstream.enqueue(reply(STEPS))
    plan = await planner(finder, encoder, pick="first").plan(REQUEST, model)
    assert plan.llm_calls == 1  # the decomposition only
    assert len(plan.choices) == 3
    for decision in plan.decisions:
        assert decision.chosen == decision.candidates[0].tool
        assert decision.reason.startswith("the first candidate, taken without asking")


async def test_pick_confident_asks_when_the_first_is_not_clearly_the_most_similar(
    upstream: FakeUpstream, model: UpstreamModel, finder: CandidateFinder, encoder: Encoder
) -> None:
    upstream.enqueue(reply(STEPS), pick(1), pick(1), pick(1))
    unsure = await planner(finder, encoder, pick="confident", pick_margin=1.0).plan(REQUEST, model)
    assert unsure.llm_calls == 4  # no candidate is 1.0 more similar than the others
    upstream.enqueue(reply(STEPS), pick(1), pick(1), pick(1))
    sure = await planner(finder, encoder, pick="confident", pick_margin=0.0).plan(REQUEST, model)
    asked = [d for d in sure.decisions if not d.reason.startswith("the first candidate")]
    assert sure.llm_calls == 1 + len(asked)
    for decision in sure.decisions:
        if decision not in asked:
            top = max(c.similarity for c in decision.candidates)
            assert decision.candidates[0].similarity == top
            assert decision.chosen == decision.candidates[0].tool


async def test_pick_confident_asks_when_a_single_candidate_leaves_nothing_to_compare(
    upstream: FakeUpstream, model: UpstreamModel, finder: CandidateFinder, encoder: Encoder
) -> None:
    # margin 0: any list of two or more would be taken without asking
    upstream.enqueue(reply(STEPS), pick(1), pick(1), pick(1))
    alone = planner(finder, encoder, top_k=1, pick="confident", pick_margin=0.0)
    plan = await alone.plan(REQUEST, model)
    assert all(len(d.candidates) == 1 for d in plan.decisions)
    assert plan.llm_calls == 4  # the decomposition and one pick per step
    assert not any(d.reason.startswith("the first candidate") for d in plan.decisions)


async def test_a_pick_cut_at_its_bound_takes_the_one_tool_its_reason_names(
    upstream: FakeUpstream, model: UpstreamModel, finder: CandidateFinder, encoder: Encoder
) -> None:
    cut = reply('{"reason": "flight_search finds the flights from Beijing, which the')
    upstream.enqueue(reply(STEPS), cut, pick(1), pick(1))
    plan = await planner(finder, encoder).plan(REQUEST, model)
    assert plan.choices["s1"] == "flight_search"
    assert "no number; the reason names flight_search" in plan.decisions[0].reason


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


async def test_a_pick_cut_before_its_number_is_never_read_as_none_fits(
    upstream: FakeUpstream, model: UpstreamModel, finder: CandidateFinder, encoder: Encoder
) -> None:
    """A long reason cut at the bound, naming no listed tool: the best-scored candidate
    is taken, as the LLM-free policy would, not "none fits"."""
    cut = Script(
        text='{"reason": "the flights from Beijing to Paris are what the traveller wants, so',
        finish_reason="length",
    )
    upstream.enqueue(reply(STEPS), cut, pick(1), pick(1))
    plan = await planner(finder, encoder).plan(REQUEST, model)
    first = plan.decisions[0]
    assert first.chosen == first.candidates[0].tool
    assert "cut before its number" in first.reason
    assert len(plan.choices) == 3


async def test_a_whole_reply_naming_no_listed_tool_still_counts_as_none_fits(
    upstream: FakeUpstream, model: UpstreamModel, finder: CandidateFinder, encoder: Encoder
) -> None:
    upstream.enqueue(reply(STEPS), reply({"reason": "nothing here books seats"}), pick(1))
    plan = await planner(finder, encoder, step_budget=2).plan(REQUEST, model)
    assert plan.decisions[0].chosen is None
    assert "named no listed tool" in plan.decisions[0].reason


async def test_a_cut_reason_naming_a_tool_with_spaces_takes_that_tool(
    upstream: FakeUpstream, model: UpstreamModel, finder: CandidateFinder, encoder: Encoder
) -> None:
    cut = Script(
        text='{"reason": "Flight search finds the flights from Beijing to Paris, which the',
        finish_reason="length",
    )
    upstream.enqueue(reply(STEPS), cut, pick(1), pick(1))
    plan = await planner(finder, encoder).plan(REQUEST, model)
    assert plan.choices["s1"] == "flight_search"
    assert "the reason names flight_search" in plan.decisions[0].reason


CYCLE = {
    "subtasks": [
        {"id": "a", "text": "x", "needs": ["b"]},
        {"id": "b", "text": "y", "needs": ["a"]},
    ]
}


async def test_a_retry_of_the_decomposition_cannot_flip_it_to_no_tools(
    upstream: FakeUpstream, model: UpstreamModel, finder: CandidateFinder, encoder: Encoder
) -> None:
    upstream.enqueue(reply(CYCLE), reply({"no_tools": True}), reply(STEPS), *[pick(1)] * 3)
    plan = await planner(finder, encoder).plan(REQUEST, model)
    assert not plan.no_tools
    assert plan.choices == {"s1": "flight_search", "s2": "book_flight", "s3": "send_sms"}
    assert "a tool is needed" in prompts(upstream)[2]


async def test_no_tools_is_refused_once_the_triage_said_tools_are_needed(
    upstream: FakeUpstream, model: UpstreamModel, finder: CandidateFinder, encoder: Encoder
) -> None:
    upstream.enqueue(reply("several"), reply({"no_tools": True}), reply(STEPS), *[pick(1)] * 3)
    plan = await planner(finder, encoder, triage=True).plan(REQUEST, model)
    assert not plan.no_tools
    assert len(plan.choices) == 3
    assert "a tool is needed" in prompts(upstream)[2]


async def test_an_unreadable_triage_leaves_no_tools_to_the_decomposition(
    upstream: FakeUpstream, model: UpstreamModel, finder: CandidateFinder, encoder: Encoder
) -> None:
    upstream.enqueue(reply("hmm"), reply({"no_tools": True}))
    plan = await planner(finder, encoder, triage=True).plan("Hi! How are you?", model)
    assert plan.no_tools
    assert plan.llm_calls == 2
