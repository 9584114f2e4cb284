"""``toolgraph eval plan`` on a small TaskBench-format folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval.plan_eval import Dataset, f1, load_dataset, mask_tool_names
from proxy.cli import main


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
