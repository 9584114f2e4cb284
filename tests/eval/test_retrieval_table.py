"""The table's nested choice: no row's setting is chosen on the row itself."""

from __future__ import annotations

from typing import Any

import pytest

from eval.retrieval_table import choose, main


def _row(**ndcg: float) -> dict[str, Any]:
    return {"grid": {g: {"ndcg@5": v, "recall@5": v} for g, v in ndcg.items()}}


def test_each_row_takes_the_setting_best_on_the_other_training_sets() -> None:
    report = {
        "left_out:a": _row(x=90.0, y=10.0),  # alone it would pick x
        "left_out:b": _row(x=10.0, y=60.0),
        "left_out:c": _row(x=20.0, y=50.0),
        "unseen:u": _row(x=99.0, y=1.0),
    }
    chosen = choose(report)
    # a is scored at what b and c prefer, not at its own best.
    assert chosen["left_out:a"] == {"setting": "y", "ndcg@5": 10.0, "recall@5": 10.0}
    # b: a and c mean x 55, y 30.
    assert chosen["left_out:b"]["setting"] == "x"
    # An unseen row is chosen on every training row (x 40, y 40: the first best wins).
    assert chosen["unseen:u"]["setting"] == "x"
    assert "unseen:u" not in {r for r in report if r.startswith("left_out:")}


def test_an_unseen_row_never_chooses_for_itself() -> None:
    report = {"left_out:a": _row(x=1.0, y=2.0), "unseen:u": _row(x=100.0, y=0.0)}
    assert choose(report)["unseen:u"]["setting"] == "y"


def test_the_paired_gain_averages_sets_and_brackets_it() -> None:
    from eval.retrieval_table import paired_gain

    def per_query(first: list[float], other: list[float]) -> dict[str, Any]:
        return {"ndcg@5_per_query": {"first": first, "expanded": other}}

    report = {
        "left_out:a": per_query([0.5, 0.5], [0.6, 0.6]),  # +10 on every query
        "left_out:b": per_query([0.5, 0.7, 0.9], [0.5, 0.7, 0.9]),  # level
    }
    assert paired_gain(report, "expanded", ["left_out:a", "left_out:b"]) == (5.0, 5.0, 5.0)
    report["left_out:b"] = per_query([0.0, 1.0], [1.0, 0.0])  # +100 or -100: a wide interval
    whole, low, high = paired_gain(report, "expanded", ["left_out:a", "left_out:b"])
    assert whole == 5.0
    assert low < 0 < high


def test_the_gate_s_scores_count_what_a_gate_that_always_says_tool_gets() -> None:
    from eval.retrieval_table import _auc, gate_score

    gold = [True, True, False, False]
    assert gate_score(gold, [True] * 4) == {"accuracy": 0.5, "precision": 0.5, "recall": 1.0}
    assert _auc(gold, [0.9, 0.8, 0.7, 0.85]) == 0.75  # one "none" row above one "tool" row
    assert _auc(gold, [0.5] * 4) == 0.5


def test_a_gate_it_does_not_know_stops_it_on_one_line() -> None:
    with pytest.raises(SystemExit, match=r"^eval.retrieval_table: --gate-weights coverag: must "):
        main(["--gate-unseen", "--gate-weights", "coverag"])
