"""What one request may cost: its model calls before the answer are bounded, and a
call a plan repeats with the same arguments runs once."""

from __future__ import annotations

from testing.brain import Brain, plan_of
from tests.conftest import StartProxy
from tests.orchestrate.conftest import ORCHESTRATE, sdk, trace, user

#: every pick asked, by the phrase of its step (Brain.tools); no reflection
PLANNER = {"profile": "full", "reflection_rounds": 0, "memory_k": 0}


def test_model_calls_before_the_answer_are_bounded_and_the_answer_still_comes(
    start_proxy: StartProxy, brain: Brain
) -> None:
    steps = [(f"evaluate the expression number {i}", []) for i in range(1, 7)]
    brain.plan = plan_of(*steps)
    brain.tools = {"evaluate the expression": "evaluate_expression"}
    brain.arguments = {"evaluate the expression": {"expression": "6*7"}}
    proxy = start_proxy(planner=PLANNER, orchestrate={"max_model_calls": 4})
    raw = sdk(proxy).chat.completions.with_raw_response.create(
        model="fake-model", messages=user("Evaluate six expressions."), extra_body=ORCHESTRATE
    )
    content = raw.parse().choices[0].message.content or ""
    before_answer = sum(brain.asked.values()) - brain.asked["answer"]
    assert before_answer == 4  # a decomposition, six picks and six arguments unbounded
    assert content.startswith("Answer from the results")
    notes = trace(proxy, raw.headers["x-toolgraph-trace-id"])["plan"]["notes"]
    assert any("model calls are spent" in note for note in notes)


def test_a_call_a_plan_repeats_with_the_same_arguments_runs_once(
    start_proxy: StartProxy, brain: Brain
) -> None:
    brain.plan = plan_of(("evaluate 6*7", []), ("evaluate 6*7 once more", []))
    brain.tools = {"evaluate 6*7": "evaluate_expression"}
    brain.arguments = {"evaluate 6*7": {"expression": "6*7"}}
    proxy = start_proxy(planner=PLANNER)
    raw = sdk(proxy).chat.completions.with_raw_response.create(
        model="fake-model", messages=user("Evaluate 6*7 twice."), extra_body=ORCHESTRATE
    )
    calls = trace(proxy, raw.headers["x-toolgraph-trace-id"])["calls"]
    assert [call["tool"] for call in calls] == ["evaluate_expression"] * 2
    assert [call["outcome"] for call in calls] == ["ok", "ok"]
    assert sorted(call["reused"] for call in calls) == [False, True]
    assert calls[0]["output"] == calls[1]["output"]
