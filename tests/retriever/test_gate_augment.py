"""The gate's made "no tool" rows: a request without the tool it needs, trained on and
never scored."""

from __future__ import annotations

import numpy as np

from retriever.gate.augment import CATALOG_SWAPPED, GOLD_REMOVED, augmented
from retriever.gate.data import GateRow
from retriever.gate.features import SCALARS
from retriever.gate.train import Design, Options, held_out_scores


def row(id_: str, source: str, catalog: tuple[str, ...], gold: tuple[str, ...]) -> GateRow:
    return GateRow(id_, source, "tool_call", f"query {id_}", bool(gold), catalog, gold)


def test_the_gold_tool_is_taken_away_and_the_row_needs_none() -> None:
    asked = row("1", "a", ("weather: forecast", "sms: send a text"), ("weather: forecast",))
    (made,) = augmented([asked])
    assert made.category == GOLD_REMOVED
    assert (made.needs_tool, made.catalog, made.augmented) == (False, ("sms: send a text",), True)
    assert made.query == asked.query
    assert made.source == "a"


def test_a_one_tool_request_gets_another_requests_tool() -> None:
    rows = [row("1", "a", ("weather: forecast",), ("weather: forecast",)),
            row("2", "a", ("sms: send a text",), ("sms: send a text",))]  # fmt: skip
    made = {r.id: r for r in augmented(rows)}
    assert made["1#catalog_swapped"].catalog == ("sms: send a text",)
    assert made["2#catalog_swapped"].catalog == ("weather: forecast",)
    assert {r.category for r in made.values()} == {CATALOG_SWAPPED}


def test_rows_without_a_gold_tool_make_nothing() -> None:
    no_tool = GateRow("1", "a", "irrelevant_tools", "hi", False, ("sms: send",), ())
    unknown_gold = GateRow("2", "a", "tool_call", "text Bob", True, ("sms: send",), ())
    assert augmented([no_tool, unknown_gold]) == []


def test_made_rows_are_never_scored() -> None:
    rng = np.random.default_rng(0)
    rows = 60
    made = np.arange(rows) % 3 == 0
    data = Design(
        scalars=rng.normal(size=(rows, len(SCALARS))),
        queries=rng.normal(size=(rows, 8)),
        labels=(rng.random(rows) > 0.5) & ~made,
        sources=np.array(["acebench", "clinc150", "nq_open"] * (rows // 3))[rng.permutation(rows)],
        has_catalog=np.ones(rows, dtype=bool),
        categories=np.array(["c"] * rows),
        augmented=made,
    )
    scored, thresholds = held_out_scores(
        data, "acebench", Options(steps=5, coverage=False), "enc", lambda _: None
    )
    assert len(scored) == int(((data.sources == "acebench") & ~made).sum())
    assert set(thresholds) == {"balanced", "confident", "cost", "accuracy", "recall98"}
