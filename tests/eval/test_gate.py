"""``toolgraph eval gate``: the four scores of the shipped gate or of the one ``--weights``
names, and one readable line for input it cannot read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval.gate import score
from proxy.cli import main
from retriever.gate.model import COVERAGE_WEIGHTS, load_gate

TOOLS = [
    {"name": "get_weather_forecast", "description": "Weather forecast for a city by day."},
    {"name": "send_sms", "description": "Send a text message to a phone number."},
    {"name": "convert_currency", "description": "Convert an amount between two currencies."},
]
ROWS = [
    {"query": "Will it rain in Oslo tomorrow?", "needs_tool": True},
    {"query": "Text my brother that I'm running late", "needs_tool": True},
    {"query": "How many euros is 250 US dollars?", "needs_tool": True},
    {"query": "Thanks, that helps a lot!", "needs_tool": False},
    {"query": "Hello! How are you today?", "needs_tool": False},
    {"query": "Tell me a joke about cats", "needs_tool": False},
]


def write(tmp_path: Path, rows: str, tools: str) -> list[str]:
    (tmp_path / "data.jsonl").write_text(rows)
    (tmp_path / "tools.json").write_text(tools)
    return ["eval", "gate", "--data", str(tmp_path / "data.jsonl"),
            "--tools", str(tmp_path / "tools.json"), "--quiet"]  # fmt: skip


def test_the_scores_of_needs_a_tool() -> None:
    scores = score([True, True, False, False], [True, False, True, False])
    assert scores == {"accuracy": 0.5, "precision": 0.5, "recall": 0.5, "f1": 0.5}
    assert score([False], [False]) == {"accuracy": 1.0, "precision": 0, "recall": 0, "f1": 0}


def test_eval_gate_prints_and_writes_the_four_scores(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = "\n".join(json.dumps(row) for row in ROWS) + "\n"
    out = tmp_path / "scores.json"
    assert main([*write(tmp_path, rows, json.dumps(TOOLS)), "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    written = json.loads(out.read_text())
    assert set(written) == {"accuracy", "precision", "recall", "f1"}
    # At the shipped balanced threshold (0.24) the three that need no tool score under
    # 0.19 and the texting and currency requests over 0.35; "Will it rain in Oslo
    # tomorrow?" scores 0.19-0.20 against the forecast tool, under it (a missed tool).
    assert written == pytest.approx(
        {"accuracy": 5 / 6, "precision": 1.0, "recall": 2 / 3, "f1": 0.8}
    )
    assert "accuracy 0.8333  precision 1.0000  recall 0.6667  f1 0.8000" in printed
    # The threshold it decided at is said, and it is the shipped file's, not fitted here.
    assert f"threshold {load_gate().threshold:.2f} (shipped, balanced)" in printed


def test_eval_gate_scores_the_gate_the_setting_s_name_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = "\n".join(json.dumps(row) for row in ROWS) + "\n"
    assert main([*write(tmp_path, rows, json.dumps(TOOLS)), "--weights", "coverage"]) == 0
    threshold = load_gate(COVERAGE_WEIGHTS).threshold
    assert threshold != load_gate().threshold  # else the shipped gate would pass too
    assert f"threshold {threshold:.2f} (coverage, balanced)" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("rows", "tools", "says"),
    [
        ('{"query": "hi", "needs_tool": true}\nnot json\n', "[]", "line 2 is not JSON"),
        ('{"query": "hi", "needs_tool": "yes"}\n', "[]", '"needs_tool" must be true or false'),
        ('{"needs_tool": true}\n', "[]", '"query" must be a string'),
        ("\n", "[]", "holds no requests"),
        ('{"query": "hi", "needs_tool": true}\n', '{"name": "x"}', "must hold a JSON list"),
        ('{"query": "hi", "needs_tool": true}\n', '[{"description": "x"}]', "entry 0"),
        ('{"query": "hi", "needs_tool": true}\n', "[", "is not JSON"),
    ],
)
def test_eval_gate_names_what_is_wrong(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], rows: str, tools: str, says: str
) -> None:
    assert main(write(tmp_path, rows, tools)) == 2
    error = capsys.readouterr().err
    assert says in error
    assert error.count("\n") == 1


def test_eval_gate_names_a_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = write(tmp_path, '{"query": "hi", "needs_tool": true}\n', "[]")
    args[args.index("--data") + 1] = str(tmp_path / "absent.jsonl")
    assert main(args) == 2
    assert "cannot read" in capsys.readouterr().err


def test_eval_gate_names_a_gate_it_does_not_know(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = write(tmp_path, '{"query": "hi", "needs_tool": true}\n', "[]")
    assert main([*args, "--weights", "coverag"]) == 2
    error = capsys.readouterr().err
    assert "--weights coverag: must be `shipped`, `coverage` or the path" in error
    assert error.count("\n") == 1
