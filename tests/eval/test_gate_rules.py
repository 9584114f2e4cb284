"""The rules of eval.gate_rules: a cutoff chosen on the rows against broad catalogs."""

from __future__ import annotations

import numpy as np

from eval.gate_rules import GRID, Scored, cutoff_on_broad, shipped_rule
from retriever.gate.broad import BROAD_NONE, BROAD_TOOL
from retriever.gate.train import Design


def _rows() -> tuple[Design, Scored]:
    """Narrow rows that part at any threshold, and broad rows whose "no tool" half
    scores 0.6: only a cutoff over 0.6 (the bank's scores at 0.8 x the quantile) parts
    those."""
    labels = np.array([True, False] * 10 + [True] * 10 + [False] * 10)
    probability = np.array([0.9, 0.1] * 10 + [0.95] * 10 + [0.6] * 10)
    sources = np.array(["a"] * 20 + ["r"] * 10 + ["c"] * 10)
    categories = np.array(["c"] * 20 + [BROAD_TOOL] * 10 + [BROAD_NONE] * 10)
    cuts = np.zeros((40, len(GRID)))
    cuts[20:] = 0.8 * np.asarray(GRID)
    rows = len(labels)
    data = Design(
        scalars=np.zeros((rows, 3)),
        queries=np.zeros((rows, 2)),
        labels=labels,
        sources=sources,
        has_catalog=np.ones(rows, dtype=bool),
        categories=categories,
        augmented=np.array([False] * 20 + [True] * 20),
    )
    return data, Scored(labels, probability, cuts)


def test_the_cutoff_chosen_on_broad_rows_parts_them() -> None:
    data, inner = _rows()
    threshold, column = cutoff_on_broad(data, inner)
    assert column is not None
    assert GRID[column] == 0.8  # the lowest quantile whose cutoff (0.64) is over 0.6
    said = inner.probability >= inner.at(threshold, column)
    assert np.array_equal(said, inner.labels)


def test_the_shipped_rule_reads_the_real_rows_and_cuts_nothing() -> None:
    data, inner = _rows()
    threshold, column = shipped_rule(data, inner)
    assert column is None
    assert 0.1 < threshold <= 0.6  # the broad "no tool" rows are not what it was chosen on
