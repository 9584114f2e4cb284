"""A pick that cannot be fed is a failed pick: orchestrate mode backtracks to the
next candidate, and asks the user only when no candidate can run."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import pytest

from testing.brain import json_script, plan_of
from testing.fake_upstream import FakeUpstream, Script
from testing.ports import free_port
from tests.conftest import ServerThread, StartProxy
from tests.orchestrate.conftest import (
    ORCHESTRATE,
    Brain,
    http_tool,
    orchestrated,
    sdk,
    seed_catalog,
    user,
)

QUESTION = "Evaluate 2*pi*50 numerically."
#: retrieval's first candidate is taken without asking: which tool comes first is the
#: catalog's, the backtracking is what is tested
PLANNER = {"profile": "small", "pick": "first", "triage": False}
#: The built-in tools that answer the question once fed.
EVALUATORS = ("evaluate_expression", "calculate_integral", "calculate_derivative")


def fed_all_but(unfed: str = "") -> dict[str, Any]:
    """The question's arguments for every one of :data:`EVALUATORS` but ``unfed``."""
    return {name: {"expression": "2*pi*50"} for name in EVALUATORS if name != unfed}


def tool_named(prompt: str) -> str:
    """The tool the argument writer's prompt is about."""
    spec = re.search(r"Tool:\n(.*)", prompt)
    return str(json.loads(spec.group(1))["name"]) if spec else ""


@dataclass
class ByTool(Brain):
    """Arguments by the tool the writer is asked about; other tools: a missing value."""

    by_tool: dict[str, Any] = field(default_factory=dict)
    written_for: list[str] = field(default_factory=list)

    def _script(self, request: dict[str, Any], stage: str, system: str) -> Script | None:
        if stage != "arguments":
            return super()._script(request, stage, system)
        self.asked[stage] += 1
        name = tool_named(str(request["messages"][1]["content"]))
        self.written_for.append(name)
        missing = {"missing": ["expression"], "question": f"What should {name} compute?"}
        return json_script(self.by_tool.get(name, missing))


@pytest.fixture
def by_tool(upstream: FakeUpstream) -> ByTool:
    brain = ByTool(plan=plan_of((QUESTION, [])))
    upstream.responder = brain
    return brain


@pytest.fixture(params=["llm", "graph"])
def proxy(start_proxy: StartProxy, request: pytest.FixtureRequest) -> ServerThread:
    """The pick without asking, by the LLM policy's walk or by the LLM-free policy."""
    return start_proxy(planner=PLANNER if request.param == "llm" else {"policy": "graph"})


def test_an_unfed_pick_backtracks_to_the_next_candidate_that_runs(
    proxy: ServerThread, by_tool: ByTool
) -> None:
    first = _first_pick(proxy, by_tool)
    by_tool.by_tool = fed_all_but(first)
    content, found = orchestrated(proxy, QUESTION)
    (call,) = found["calls"]
    assert call["tool"] != first
    assert call["outcome"] == "ok"
    assert f"backtrack: {first} could not run" in found["plan"]["notes"]
    assert content.startswith("Answer from the results")  # answered, not asked
    assert by_tool.written_for[-2:] == [first, call["tool"]]


def test_the_user_is_asked_only_when_no_candidate_can_run(
    proxy: ServerThread, by_tool: ByTool
) -> None:
    first = _first_pick(proxy, by_tool)
    completion = sdk(proxy).chat.completions.create(
        model="fake-model", messages=user(QUESTION), extra_body=ORCHESTRATE
    )
    assert completion.choices[0].message.content == f"What should {first} compute?"
    assert len(set(by_tool.written_for[-3:])) == 3  # three candidates tried, each once
    assert by_tool.asked["answer"] == 0


def _first_pick(proxy: ServerThread, brain: ByTool) -> str:
    """The tool retrieval puts first for the question (every tool unfed: one run asks)."""
    brain.by_tool = {}
    sdk(proxy).chat.completions.create(
        model="fake-model", messages=user(QUESTION), extra_body=ORCHESTRATE
    )
    first = brain.written_for[0]
    brain.written_for.clear()
    brain.asked.clear()
    return first


def test_a_re_plan_keeps_the_sub_tasks_and_chooses_only_the_tools_again(
    start_proxy: StartProxy, by_tool: ByTool
) -> None:
    """The triage and the decomposition are asked once per request: a backtrack's
    re-plan picks again over the sub-tasks they made."""
    proxy = start_proxy(planner={**PLANNER, "triage": True})
    by_tool.sort = "several"
    first = _first_pick(proxy, by_tool)
    by_tool.by_tool = fed_all_but(first)
    _, found = orchestrated(proxy, QUESTION)
    (call,) = found["calls"]
    assert call["outcome"] == "ok"
    assert f"backtrack: {first} could not run" in found["plan"]["notes"]
    assert (by_tool.asked["triage"], by_tool.asked["decompose"]) == (1, 1)
    assert any(note.startswith("re-planned") for note in found["plan"]["notes"])


def test_a_pick_that_cannot_be_reached_backtracks_to_the_next_candidate(
    start_proxy: StartProxy, by_tool: ByTool
) -> None:
    """A tool whose host cannot be reached fails whatever its arguments: like an
    unfed pick, the next candidate runs."""
    closed = f"http://127.0.0.1:{free_port()}/evaluate"  # nothing listens there
    seed_catalog([http_tool("remote_evaluator", f"{QUESTION} Evaluates it numerically.", closed)])
    proxy = start_proxy(planner=PLANNER, executor={"allow_private_networks": True, "retries": 0})
    assert _first_pick(proxy, by_tool) == "remote_evaluator"
    by_tool.by_tool = {**fed_all_but(), "remote_evaluator": {"label": "2*pi*50"}}
    _, found = orchestrated(proxy, QUESTION)
    (call,) = found["calls"]
    assert call["tool"] != "remote_evaluator"
    assert call["outcome"] == "ok"
    assert "backtrack: remote_evaluator could not run" in found["plan"]["notes"]


@dataclass
class BySubTask(ByTool):
    """Arguments by tool and sub-task: the tool in ``unfed`` cannot be fed for the
    sub-task that names ``unfed_in``, every other pair can."""

    unfed: str = ""
    unfed_in: str = "2*pi*50"

    def _script(self, request: dict[str, Any], stage: str, system: str) -> Script | None:
        if stage == "arguments":
            prompt = str(request["messages"][1]["content"])
            task = re.search(r"Sub-task: (.*)", prompt)
            expression = re.search(r"Evaluate (\S+) ", task.group(1) if task else "")
            name = tool_named(prompt)
            fed = not (name == self.unfed and self.unfed_in in prompt.split("Sub-task:")[1])
            self.by_tool = {name: {"expression": expression.group(1)}} if fed and expression else {}
        return super()._script(request, stage, system)


def test_a_tool_unfed_for_one_sub_task_is_still_offered_for_another(
    start_proxy: StartProxy, upstream: FakeUpstream
) -> None:
    """The re-plan keeps a tool out of the sub-task it could not run for only: for the
    other it is still the first candidate, and its call there stands."""
    brain = BySubTask(
        plan=plan_of(("Evaluate 2*pi*50 numerically.", []), ("Evaluate 2*pi*60 numerically.", []))
    )
    upstream.responder = brain
    brain.sort = "several"
    proxy = start_proxy(planner={**PLANNER, "triage": True})
    ask = "Evaluate 2*pi*50 numerically, and evaluate 2*pi*60 numerically."
    _, first = orchestrated(proxy, ask)
    (tool,) = {call["tool"] for call in first["calls"]}  # both sub-tasks pick the same tool first
    brain.unfed = tool
    _, found = orchestrated(proxy, ask)
    by_step = {call["node"]: call for call in found["calls"]}
    assert f"backtrack: {tool} could not run" in found["plan"]["notes"]
    assert by_step["s1"]["tool"] != tool
    assert by_step["s1"]["outcome"] == "ok"
    assert by_step["s2"]["tool"] == tool
    assert by_step["s2"]["outcome"] == "ok"
