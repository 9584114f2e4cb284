"""The end-to-end eval's select and tool_search arms, against the fake upstream: the
client runs the calls the model asks for, and the upstream sees the few tools the
question needs, not the catalog."""

from __future__ import annotations

import json
from typing import Any

import pytest

from eval.data_folder import dataset
from eval.e2e.__main__ import config_from, parse_args
from eval.e2e.arms import Arm
from eval.e2e.report import markdown, summarise
from eval.e2e.run import Row, RunConfig, run_all
from eval.e2e.tasks import TASKS
from testing.fake_upstream import FakeToolCall, FakeUpstream, Script
from tests.conftest import unavailable

CORPUS = dataset("toolbench_stable", "corpus.jsonl.gz")
PHOTON = next(task for task in TASKS if task.id == "photon")
SIZE = 100


@pytest.fixture
def data_sets() -> None:
    if not CORPUS.exists():
        unavailable(f"{CORPUS} is missing: set EVAL_DATA to the data folder")


def model(request: dict[str, Any]) -> Script:
    """Calls evaluate_expression when it was offered, then answers with its result."""
    results = [m["content"] for m in request["messages"] if m.get("role") == "tool"]
    if results:
        return Script(text=f"The energy is {json.loads(results[-1])} J.")
    offered = {tool["function"]["name"] for tool in request.get("tools") or ()}
    if "evaluate_expression" not in offered:
        return Script(text="I have no tool for that.")
    arguments = json.dumps({"expression": "6.62607015e-34 * 5e14"})
    return Script(tool_calls=(FakeToolCall("evaluate_expression", arguments),))


def forwarded(upstream: FakeUpstream) -> list[list[str]]:
    """The names of the tools each chat request to the upstream carried, in order."""
    return [
        [tool["function"]["name"] for tool in request.body.get("tools") or ()]
        for request in upstream.requests
        if request.path.endswith("/chat/completions")
    ]


def run(upstream: FakeUpstream, arm: Arm) -> tuple[Row, list[list[str]], list[dict[str, Any]]]:
    upstream.reset()
    upstream.responder = model
    config = RunConfig(upstream.base_url, "fake-model", (SIZE,), (arm,), (PHOTON,), CORPUS, 300.0)
    rows: list[Row] = []
    try:
        run_all(config, rows.append)
        bodies = [r.body for r in upstream.requests if r.path.endswith("/chat/completions")]
        return rows[0], forwarded(upstream), bodies
    finally:
        upstream.reset()


@pytest.mark.usefixtures("data_sets")
@pytest.mark.parametrize("arm", ["select", "tool_search"])
def test_the_arm_runs_the_call_and_the_upstream_sees_a_few_tools(
    fake_upstream: FakeUpstream, arm: Arm
) -> None:
    row, tools, bodies = run(fake_upstream, arm)

    assert row["error"] == ""
    assert row["correct"], row["answer"]
    assert row["tool_calls"] == ["evaluate_expression"]
    assert row["rounds"] == 2
    assert row["prompt_tokens"] > 0
    assert len(tools) == 2
    first, second = tools
    assert "evaluate_expression" in first
    assert len(first) < SIZE // 4  # cut to a few, not the catalog
    assert second[: len(first)] == first  # loaded tools stay, in order: the prefix holds
    assert not any("defer_loading" in json.dumps(tool) for b in bodies for tool in b["tools"])
    if arm == "tool_search":
        assert set(row["loaded"]) == set(second)  # what the search reported loading went
        assert bodies[0]["messages"][0] == {
            "role": "system",
            "content": bodies[1]["messages"][0]["content"],
        }
        assert [m["role"] for m in bodies[1]["messages"]] == ["system", "user", "assistant", "tool"]
    else:
        assert row["loaded"] == []


@pytest.mark.usefixtures("data_sets")
def test_every_tool_goes_upstream_in_the_all_tools_arm(fake_upstream: FakeUpstream) -> None:
    row, tools, _ = run(fake_upstream, "all_tools")
    assert row["correct"]
    assert [len(names) for names in tools] == [SIZE, SIZE]


def test_the_new_arms_are_known_and_labelled_but_not_run_by_default() -> None:
    assert config_from(parse_args(["--bfcl", "none"]), "u").arms == (
        "orchestrate",
        "all_tools",
        "no_tools",
    )
    picked = config_from(parse_args(["--bfcl", "none", "--arms", "select,tool_search"]), "u")
    assert picked.arms == ("select", "tool_search")
    with pytest.raises(SystemExit, match="unknown arms: search"):
        config_from(parse_args(["--bfcl", "none", "--arms", "search"]), "u")
    row = {"catalog": 100, "task": "t", "kind": "single", "seconds": 1.0, "correct": True}
    row |= {"prompt_tokens": 10, "completion_tokens": 1, "tool_calls": [], "error": ""}
    table = markdown(summarise([row | {"arm": "select"}, row | {"arm": "tool_search"}]))
    assert "| (d) select mode | 100 | 1/1 |" in table
    assert "| (e) tool_search | 100 | 1/1 |" in table
