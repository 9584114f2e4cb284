"""The end-to-end eval's checker, distractor catalog and summary (no model needed)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from eval.data_folder import dataset
from eval.e2e import merge
from eval.e2e.bfcl import bfcl_tasks, bfcl_tools, serve_tools
from eval.e2e.catalog import catalog
from eval.e2e.report import markdown, summarise
from eval.e2e.tasks import TASKS, Task, is_correct, numbers_in
from tests.conftest import unavailable

CORPUS = dataset("toolbench_stable", "corpus.jsonl.gz")
SKIN = Task("skin", "single", "?", (1.9023e-6,))
CROSS = Task("cross", "single", "?", (-3.0, 6.0, -3.0))


@pytest.fixture
def data_sets() -> None:
    """The data folder's sets these tests read: missing, a skip (a failure under CI)."""
    if not CORPUS.exists():
        unavailable(f"{CORPUS} is missing: set EVAL_DATA to the data folder")


@pytest.mark.parametrize(
    ("text", "numbers"),
    [
        ("The result is 1.9023e-06 m.", [1.9023e-06]),
        ("about 1.90 \u00d7 10^-6 m", [1.90e-6]),
        ("about 1.90 x 10^{-6} m", [1.90e-6]),
        (r"$1.9 \times 10^{-6}$", [1.9e-6]),
        ("it is \u22123.5", [-3.5]),
        ("1,234.5 and 7", [1234.5, 7.0]),
        ("[-3, 6, -3]", [-3.0, 6.0, -3.0]),
    ],
)
def test_numbers_in(text: str, numbers: list[float]) -> None:
    assert list(numbers_in(text)) == pytest.approx(numbers)


@pytest.mark.parametrize(
    ("task", "answer", "correct"),
    [
        (SKIN, "The skin depth is about 1.90 x 10^-6 m.", True),
        (SKIN, "The skin depth is 2.09e-6 m.", False),
        (SKIN, "", False),
        (CROSS, "The cross product is [-3, 6, -3].", True),
        (CROSS, "The cross product is [3, -6, 3].", False),  # -3 missing
        (Task("capital", "none", "?", words="Paris"), "It is paris.", True),
        (Task("capital", "none", "?", words="Paris"), "It is Lyon.", False),
    ],
)
def test_is_correct(task: Task, answer: str, correct: bool) -> None:
    assert is_correct(task, answer) is correct


def test_tasks_have_unique_ids_and_a_check() -> None:
    assert len({task.id for task in TASKS}) == len(TASKS)
    assert all(bool(task.expected) != bool(task.words) for task in TASKS)


@pytest.mark.usefixtures("data_sets")
def test_catalogs_nest_and_hold_the_builtins() -> None:
    small, large = catalog(10, CORPUS), catalog(100, CORPUS)
    assert len(small) == 10
    assert len(large) == 100
    assert [tool.name for tool in large[:10]] == [tool.name for tool in small]
    assert len({tool.name for tool in large}) == 100
    assert "evaluate_expression" in {tool.name for tool in small}


def test_summary_counts_correct_answers_tokens_and_overflows() -> None:
    row = {
        "arm": "all_tools",
        "catalog": 1000,
        "task": "t",
        "kind": "single",
        "seconds": 2.0,
        "prompt_tokens": 100,
        "completion_tokens": 10,
        "tool_calls": [],
        "error": "",
    }
    rows = [
        row | {"correct": True},
        row | {"correct": False, "error": "400 context_length_exceeded: x"},
    ]
    (line,) = summarise(rows)
    assert line["correct"] == 1
    assert line["tokens_per_correct"] == 220
    assert line["context_overflows"] == 1
    assert "| (b) all tools | 1000 | 1/2 | 1/2 / - / - / - |" in markdown([line])


def test_merge_tables_the_rows_of_every_part(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    row = {
        "task": "t",
        "kind": "single",
        "seconds": 2.0,
        "prompt_tokens": 100,
        "completion_tokens": 10,
        "tool_calls": [],
        "error": "",
        "correct": True,
    }
    parts = []
    for arm, size, tokens in (("no_tools", 0, 50), ("orchestrate", 100, 900)):
        path = tmp_path / f"e2e_{arm}.json"
        report = {"command": f"python -m eval.e2e --arms {arm}", "code": "abc", "model": "m"}
        rows = [row | {"arm": arm, "catalog": size, "prompt_tokens": tokens}]
        if arm == "orchestrate":
            rows.append(rows[0] | {"catalog": 1000, "prompt_tokens": 1000})
        path.write_text(json.dumps(report | {"rows": rows}))
        parts.append(str(path))
    monkeypatch.setattr(merge, "RESULTS", tmp_path)
    assert merge.main(["both", *parts]) == 0
    printed = capsys.readouterr().out
    assert "| (c) no tools | - | 1/1 |" in printed
    assert "| (a) toolgraph orchestrate | 100 | 1/1 |" in printed
    assert "| (a) toolgraph orchestrate | 1000 | 1/1 |" in printed
    assert "after cut: not recorded" in printed  # a part cut short has no load after
    assert (tmp_path / "e2e_both.png").stat().st_size > 0


def test_merge_takes_only_the_arms_a_part_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    row = {"task": "t", "kind": "single", "seconds": 2.0, "completion_tokens": 10}
    row |= {"tool_calls": [], "error": "", "prompt_tokens": 100}
    path = tmp_path / "e2e_old.json"
    rows = [row | {"arm": "no_tools", "catalog": 0, "correct": True}]
    rows += [row | {"arm": "orchestrate", "catalog": 100, "correct": False}]
    path.write_text(json.dumps({"command": "c", "code": "abc", "model": "m", "rows": rows}))
    monkeypatch.setattr(merge, "RESULTS", tmp_path)
    assert merge.main(["kept", f"{path}:no_tools"]) == 0
    printed = capsys.readouterr().out
    assert "| (c) no tools | - | 1/1 |" in printed
    assert "orchestrate |" not in printed
    assert "1 rows of no_tools" in printed
    assert merge.read_part(f"{tmp_path}/a:b.json") == (tmp_path / "a:b.json", None)


def test_merge_rescore_judges_the_stored_answers_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    row = {"arm": "orchestrate", "catalog": 100, "kind": "graph", "seconds": 2.0}
    row |= {"prompt_tokens": 100, "completion_tokens": 10, "tool_calls": [], "error": ""}
    rows = [
        row | {"task": "geo_rhine_danube", "answer": "Germany, Austria, Switzerland"},
        row | {"task": "geo_rhine_danube", "answer": "Germany and Austria."},
    ]
    rows = [r | {"correct": True} for r in rows]
    path = tmp_path / "e2e_part.json"
    path.write_text(json.dumps({"command": "c", "code": "abc", "model": "m", "rows": rows}))
    monkeypatch.setattr(merge, "RESULTS", tmp_path)
    assert merge.main(["--rescore", "again", str(path)]) == 0
    printed = capsys.readouterr().out
    assert "rescored: 1 verdicts changed" in printed
    assert "| (a) toolgraph orchestrate | 100 | 1/2 |" in printed


BFCL = CORPUS.parents[1] / "train" / "bfcl"


@pytest.mark.usefixtures("data_sets")
def test_bfcl_tasks_expect_what_their_gold_calls_return() -> None:
    tasks = {task.id: task for task in bfcl_tasks(BFCL)}
    assert len(tasks) == 10
    assert all(task.kind == "bfcl" for task in tasks.values())
    assert tasks["bfcl_12"].expected == pytest.approx((5000 * 1.05**10,))
    assert tasks["bfcl_70"].expected == pytest.approx((1571.66,), rel=1e-5)
    assert tasks["bfcl_72"].expected == pytest.approx((1.0, -10 / 3))
    assert "$350,000" in tasks["bfcl_70"].question
    assert is_correct(tasks["bfcl_0"], "The probability is about 0.13 %.")


@pytest.mark.usefixtures("data_sets")
def test_bfcl_tools_answer_over_http_and_reject_unusable_input_with_422() -> None:
    with serve_tools() as base:
        tools = {tool.name: tool for tool in bfcl_tools(BFCL, base)}
        assert len(tools) == 5
        mortgage = tools["mortgage_calculator"]
        assert mortgage.param_schemas()["loan_amount"] == {
            "type": "number",  # BFCL writes "float"
            "description": "The amount of the loan.",
        }
        assert mortgage.endpoint is not None
        good = {"loan_amount": 350000, "interest_rate": 0.035, "loan_period": 30}
        answer = httpx.post(mortgage.endpoint.url, json=good)
        assert answer.json()["result"] == pytest.approx(1571.66, rel=1e-5)
        percent = httpx.post(mortgage.endpoint.url, json={**good, "interest_rate": 3.5})
        assert percent.status_code == 422
        assert "interest_rate is a fraction from 0 to 1" in percent.json()["error"]


@pytest.mark.usefixtures("data_sets")
def test_catalogs_hold_the_task_tools_before_the_distractors() -> None:
    with serve_tools() as base:
        extra = bfcl_tools(BFCL, base)
    tools = catalog(10, CORPUS, extra)
    assert len(tools) == 10
    assert {tool.name for tool in extra} <= {tool.name for tool in tools}
    with pytest.raises(ValueError, match="at least the 10 task tools"):
        catalog(9, CORPUS, extra)
