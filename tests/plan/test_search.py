"""The depth-first selection against the fake upstream: how a pick's number and reason
are read, the pick modes that skip the model, backtracking within the budget, and the
reflection rounds."""

from __future__ import annotations

import pytest

from proxy.llm import UpstreamModel
from proxy.plan.candidates import CandidateFinder
from retriever.embedder import Encoder
from testing.fake_upstream import FakeUpstream, Script
from tests.plan._llm_policy import REQUEST, STEPS, pick, planner, prompts, reply


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


async def test_an_invented_or_out_of_range_choice_never_becomes_a_tool(
    upstream: FakeUpstream, model: UpstreamModel, finder: CandidateFinder, encoder: Encoder
) -> None:
    upstream.enqueue(reply(STEPS), reply({"choice": "teleport"}), pick(99), reply({"choice": 0}))
    plan = await planner(finder, encoder).plan(REQUEST, model)
    names = set(finder.store.names())
    assert set(plan.choices.values()) <= names
    assert "teleport" not in plan.choices.values()
    assert any("named no listed tool" in d.reason for d in plan.decisions)


async def test_a_pick_cut_at_its_bound_takes_the_one_tool_its_reason_names(
    upstream: FakeUpstream, model: UpstreamModel, finder: CandidateFinder, encoder: Encoder
) -> None:
    cut = reply('{"reason": "flight_search finds the flights from Beijing, which the')
    upstream.enqueue(reply(STEPS), cut, pick(1), pick(1))
    plan = await planner(finder, encoder).plan(REQUEST, model)
    assert plan.choices["s1"] == "flight_search"
    assert "no number; the reason names flight_search" in plan.decisions[0].reason


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
