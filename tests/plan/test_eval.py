"""``toolgraph eval plan`` on a small TaskBench-format folder."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from eval.plan_data import Dataset, f1, load_dataset, mask_tool_names
from proxy.cli import main
from testing.fake_upstream import FakeUpstream, Script
from tests.plan.conftest import write_taskbench


def test_steps_lose_the_tool_names(dataset: Dataset) -> None:
    first = dataset.requests[0]
    assert [t.text for t in first.subtasks] == [
        "find flights from Beijing to Paris on May 3",
        "book a seat on the flight for Li Lei",
        "send my wife a text message with the flight details",
    ]
    assert [t.needs for t in first.subtasks] == [(), ("s1",), ("s2",)]
    assert mask_tool_names("Step 2: Call book_flight to book it", ["book_flight"]) == "book it"


def test_requests_naming_unknown_tools_are_skipped(dataset: Dataset, taskbench_dir: Path) -> None:
    assert [r.id for r in dataset.requests] == ["1", "2", "3"]
    assert dataset.skipped == 1
    assert [r.id for r in load_dataset(taskbench_dir, split="test").requests] == ["1", "2"]


def test_f1_of_sets() -> None:
    assert f1({"a", "b"}, {"a", "c"}) == pytest.approx(0.5)
    assert f1(set(), set()) == 1.0
    assert f1({"a"}, {"b"}) == 0.0


def test_the_command_writes_one_entry_per_policy(
    taskbench_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "plan.json"
    code = main(
        ["eval", "plan", "--dataset", str(taskbench_dir), "--k", "1,3", "--json", str(out),
         "--cache-dir", str(tmp_path / "cache"), "--quiet", "--policy", "retrieval,graph"]
    )  # fmt: skip
    assert code == 0
    scores = json.loads(out.read_text())
    assert set(scores) == {"retrieval", "graph"}
    graph = scores["graph"]
    assert graph["node_f1@3"] == pytest.approx(100.0)
    assert graph["link_f1@3"] == pytest.approx(100.0)
    assert graph["candidate_recall@3/dependent"] == pytest.approx(100.0)
    assert "chain/link_f1@1" in graph
    assert graph["llm_calls"] == 0
    assert "3 requests (1 skipped)" in capsys.readouterr().out
    assert list((tmp_path / "cache").glob("*.npz"))  # document vectors cached on disk


def test_bad_arguments_are_refused(taskbench_dir: Path) -> None:
    assert main(["eval", "plan", "--dataset", str(taskbench_dir), "--k", "0"]) == 2
    assert main(["eval", "plan", "--dataset", str(taskbench_dir), "--policy", "magic"]) == 2
    assert main(["eval", "plan", "--dataset", "/nonexistent"]) == 2


RunPolicy = Callable[[str], dict[str, float]]


@pytest.fixture
def run_policy(
    taskbench_dir: Path, tmp_path: Path, upstream: FakeUpstream, monkeypatch: pytest.MonkeyPatch
) -> RunPolicy:
    """``toolgraph eval plan --policy P`` against the fake upstream; P's scores."""
    monkeypatch.setenv("TOOLGRAPH_UPSTREAM_BASE_URL", upstream.base_url)
    monkeypatch.setenv("TOOLGRAPH_UPSTREAM_API_KEY", "sk-test-0123456789")

    def run(policy: str) -> dict[str, float]:
        out = tmp_path / f"{policy}.json"
        code = main(
            ["eval", "plan", "--dataset", str(taskbench_dir), "--policy", policy, "--k", "3",
             "--model", "fake-model", "--json", str(out), "--quiet",
             "--cache-dir", str(tmp_path / "cache")]
        )  # fmt: skip
        assert code == 0
        scores: dict[str, float] = json.loads(out.read_text())[policy]
        return scores

    return run


def test_the_llm_policy_runs_against_the_configured_upstream(
    upstream: FakeUpstream, run_policy: RunPolicy
) -> None:
    pick = Script(text=json.dumps({"choice": 1, "reason": "fits"}))
    done = Script(text=json.dumps({"verdict": "success"}))
    # Three requests of 3, 2 and 1 sub-tasks: a pick each, then one reflection.
    upstream.enqueue(pick, pick, pick, done, pick, pick, done, pick, done)
    scores = run_policy("llm")
    assert scores["llm_calls"] == pytest.approx(3.0)
    assert scores["fallback_share"] == 0
    assert scores["node_f1@3"] == pytest.approx(100.0)
    assert len(upstream.requests) == 9
    assert all(r.body["model"] == "fake-model" for r in upstream.requests)


def test_llm_steps_need_the_llm_policy(taskbench_dir: Path) -> None:
    assert main(["eval", "plan", "--dataset", str(taskbench_dir), "--steps", "llm"]) == 2


def test_the_vanilla_baseline_asks_once_per_request_and_keeps_to_the_list(
    upstream: FakeUpstream, run_policy: RunPolicy
) -> None:
    upstream.enqueue(
        Script(text=json.dumps({"choices": {"s1": 1, "s2": 99, "s3": "send_sms"}})),
        Script(text="not json"),
        Script(text=json.dumps({"choices": {"s1": 0}})),
    )
    scores = run_policy("vanilla")
    assert len(upstream.requests) == 3
    first = "\n".join(m["content"] for m in upstream.requests[0].body["messages"])
    assert "- s2: book a seat on the flight for Li Lei" in first
    assert "1. flight_search" in first
    # Request 1: only s1 gets a tool (99 is out of range, a name is no number).
    assert scores["llm_calls"] == pytest.approx(1.0)
    assert scores["candidate_recall@3"] > 0
    assert scores["node_f1@3"] == pytest.approx(100 * (0.5 + 0 + 0) / 3, abs=0.01)


def test_the_react_baseline_asks_once_per_step_and_carries_its_history(
    upstream: FakeUpstream, run_policy: RunPolicy
) -> None:
    upstream.enqueue(
        Script(text=json.dumps({"thought": "flights come first", "action": 1})),
        Script(text="I would book it"),  # no JSON: the step gets no tool
        Script(text=json.dumps({"thought": "nothing fits", "action": 0})),
        Script(text=json.dumps({"thought": "search", "action": 1})),
        Script(text=json.dumps({"thought": "out of range", "action": 99})),
        Script(text=json.dumps({"thought": "stocks", "action": 1})),
    )
    scores = run_policy("react")
    assert len(upstream.requests) == 6  # one per gold step of three requests: 3 + 2 + 1
    prompts = ["\n".join(m["content"] for m in r.body["messages"]) for r in upstream.requests]
    assert "(nothing yet)" in prompts[0]
    assert "Step s1: " in prompts[0]
    assert "Thought: flights come first" in prompts[1]
    assert "Action: s1 -> flight_search" in prompts[1]
    assert "Observation: flight_search was chosen" in prompts[1]
    assert "Action: s2 -> none" in prompts[2]
    assert "(nothing yet)" in prompts[3]  # a new request starts a new history
    assert scores["llm_calls"] == pytest.approx(2.0)
    assert scores["node_f1@3"] > 0


#: One gold step of two clauses whose tool is the second's: the whole text's vector
#: lands on the weather, its second clause on the text message.
TWO_CLAUSES = {
    "id": "9",
    "user_request": "Check the weekend weather and text my wife.",
    "task_steps": [
        "Step 1 Call send_sms to look up the weather in Paris this weekend, "
        "and also send my wife a text message"
    ],
    "task_nodes": [{"task": "send_sms"}],
    "task_links": [],
    "type": "single",
}


@pytest.mark.parametrize(
    ("setting", "found"), [("", 100.0), ("retriever:\n  clauses: false\n", 0.0)]
)
def test_every_policy_searches_a_steps_clauses_as_the_proxy_does(
    tmp_path: Path, setting: str, found: float
) -> None:
    """The shipped retriever reads a text's clauses (``retriever.clauses``); so does every
    policy the command scores, the retrieval baseline too, and the setting turns it off."""
    folder = write_taskbench(tmp_path / "travel")
    (folder / "data.json").write_text(json.dumps(TWO_CLAUSES) + "\n")
    config = tmp_path / "toolgraph.yaml"
    config.write_text(setting)
    out = tmp_path / "plan.json"
    code = main(
        ["eval", "plan", "--dataset", str(folder), "--config", str(config), "--k", "1",
         "--json", str(out), "--cache-dir", str(tmp_path / "cache"), "--quiet"]
    )  # fmt: skip
    assert code == 0
    scores = json.loads(out.read_text())
    assert set(scores) == {"retrieval", "default"}  # no --policy: the baseline and the shipped
    for policy in scores.values():
        assert policy["candidate_recall@1"] == pytest.approx(found)
