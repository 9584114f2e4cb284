"""What one request may cost: its model calls before the answer are bounded in number
and in time (the answer still comes), and a call a plan repeats with the same
arguments runs once."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from testing.brain import Brain, plan_of, stage_of
from testing.fake_upstream import FakeUpstream, Script
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


@dataclass
class SlowBrain(Brain):
    """Every question but the answer takes ``seconds``."""

    seconds: float = 1.0

    def __call__(self, request: dict[str, Any]) -> Script | None:
        script = super().__call__(request) or Script()
        messages = request.get("messages") or []
        system = str(messages[0].get("content") or "") if messages else ""
        return script if stage_of(system) == "answer" else replace(script, delay=self.seconds)


def test_the_last_quarter_of_the_request_s_time_is_kept_for_the_answer(
    start_proxy: StartProxy, upstream: FakeUpstream
) -> None:
    brain = SlowBrain()
    upstream.responder = brain
    steps = [(f"evaluate the expression number {i}", []) for i in range(1, 9)]
    brain.plan = plan_of(*steps)
    brain.tools = {"evaluate the expression": "evaluate_expression"}
    brain.arguments = {"evaluate the expression": {"expression": "6*7"}}
    proxy = start_proxy(
        planner=PLANNER, orchestrate={"preload": True}, timeouts={"request": 8.0}
    )  # the model's load is not the request's time
    raw = sdk(proxy).chat.completions.with_raw_response.create(
        model="fake-model", messages=user("Evaluate eight expressions."), extra_body=ORCHESTRATE
    )
    content = raw.parse().choices[0].message.content or ""
    assert content.startswith("Answer from the results")  # not a 504 at 8 s
    notes = trace(proxy, raw.headers["x-toolgraph-trace-id"])["plan"]["notes"]
    assert any("time for model calls before its answer is spent" in note for note in notes)
