"""The answer states what the tools returned: the numbers are named in its prompt, and
an answer holding none of them is asked for once more."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from pydantic import JsonValue

from proxy.execute.plan import PlanNode
from proxy.execute.scheduler import CallRecord, Outcome, PlanRun
from proxy.orchestrate.values import numbers_in, returned_values, states_a_value
from testing.fake_upstream import FakeUpstream, Script
from tests.conftest import ServerThread, StartProxy
from tests.orchestrate.conftest import ORCHESTRATE, Brain, sdk, trace, user

QUESTION = "Evaluate the expression 2*pi*50 numerically."


def run_of(*outputs: tuple[str, JsonValue, Outcome]) -> PlanRun:
    records = {
        f"s{i}": CallRecord(PlanNode(id=f"s{i}", tool=tool), outcome=outcome, output=output)
        for i, (tool, output, outcome) in enumerate(outputs, 1)
    }
    return PlanRun(records)


def test_returned_values_name_each_number_with_its_field_and_unit() -> None:
    run = run_of(
        ("calculate_derivative", {"derivative": "3*x**2", "value": 28.76}, Outcome.OK),
        ("run_simulation", {"units": {"E": "V/m"}, "E_magnitude": [4.99]}, Outcome.OK),
        ("evaluate_expression", None, Outcome.FAILED),
    )
    lines = [value.line() for value in returned_values(run)]
    assert lines == [
        "calculate_derivative: value = 28.76",
        "run_simulation: E_magnitude[0] = 4.99 V/m",
    ]


@pytest.mark.parametrize(
    ("answer", "stated"),
    [
        ("The derivative is 3*x**2.", False),  # the formula alone: 3 and 2 are not 28.76
        ("At x = 2 it is 28.8.", True),  # rounded to three digits
        ("about 2.876 \u00d7 10^1", True),
        ("", False),
    ],
)
def test_an_answer_states_a_value_to_within_rounding(answer: str, stated: bool) -> None:
    values = returned_values(run_of(("d", {"value": 28.76}, Outcome.OK)))
    assert states_a_value(answer, values) is stated


def test_no_returned_number_needs_no_stating() -> None:
    assert states_a_value("Done.", returned_values(run_of(("t", {"ok": "yes"}, Outcome.OK))))
    assert numbers_in("1,234.5 and \u22123") == [1234.5, -3.0]


@dataclass
class Answers(Brain):
    """Answers in turn from ``texts``; every answering prompt is kept."""

    texts: list[str] = field(default_factory=list)
    answer_prompts: list[str] = field(default_factory=list)

    def answer(self, request: dict[str, Any], system: str) -> Script:
        self.answer_prompts.append(system)
        return Script(text=self.texts.pop(0))


@pytest.fixture
def answers(upstream: FakeUpstream) -> Answers:
    brain = Answers(arguments={"2*pi": {"expression": "2*pi*50"}})
    upstream.responder = brain
    return brain


@pytest.fixture
def proxy(start_proxy: StartProxy) -> ServerThread:
    return start_proxy(planner={"policy": "graph"})


def test_an_answer_without_the_returned_number_is_asked_for_once_more(
    proxy: ServerThread, answers: Answers
) -> None:
    answers.texts = ["It is 100*pi.", "It is 314.16."]
    raw = sdk(proxy).chat.completions.with_raw_response.create(
        model="fake-model", messages=user(QUESTION), extra_body=ORCHESTRATE
    )
    assert raw.parse().choices[0].message.content == "It is 314.16."
    first, second = answers.answer_prompts
    assert "evaluate_expression: value = 314.159" in first
    assert "stated none of the values" in second
    notes = trace(proxy, raw.headers["x-toolgraph-trace-id"])["plan"]["notes"]
    assert "answer check: the answer stated no returned value; asked again: stated" in notes


def test_an_answer_with_the_returned_number_is_asked_once(
    proxy: ServerThread, answers: Answers
) -> None:
    answers.texts = ["It is 314.2 (100*pi)."]
    completion = sdk(proxy).chat.completions.create(
        model="fake-model", messages=user(QUESTION), extra_body=ORCHESTRATE
    )
    assert completion.choices[0].message.content == "It is 314.2 (100*pi)."
    assert len(answers.answer_prompts) == 1
