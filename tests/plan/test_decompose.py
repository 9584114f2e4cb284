"""The decomposition against the fake upstream: the request's numbers kept in the
sub-tasks, invalid answers sent back with their problem, bounded retries, and requests
that need no tool."""

from __future__ import annotations

import pytest

from proxy.llm import UpstreamModel
from proxy.plan.candidates import CandidateFinder
from retriever.embedder import Encoder
from testing.fake_upstream import FakeUpstream, Script
from tests.plan._llm_policy import REQUEST, STEPS, pick, planner, prompts, reply


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


async def test_a_request_needing_no_tool_is_recognised(
    upstream: FakeUpstream, model: UpstreamModel, finder: CandidateFinder, encoder: Encoder
) -> None:
    upstream.enqueue(reply({"no_tools": True}))
    plan = await planner(finder, encoder).plan("Hi! How are you?", model)
    assert plan.no_tools
    assert plan.choices == {}
    assert plan.llm_calls == 1


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
