"""The rules of eval.gate_rules: a cutoff chosen on the rows against broad catalogs."""

from __future__ import annotations

import numpy as np
import pytest

from eval.gate_rules import GRID, Scored, cutoff_on_broad, margin_on_broad, threshold_only
from retriever.gate.broad import BROAD_NONE, BROAD_TOOL
from retriever.gate.train import Design


def _rows(bank: np.ndarray | None = None) -> tuple[Design, Scored]:
    """Narrow rows that part at any threshold, and broad rows whose "no tool" half
    scores 0.6: only a cutoff over 0.6 parts those (``bank``: the broad rows' cutoff at
    each quantile of GRID; by default 0.8 x the quantile)."""
    labels = np.array([True, False] * 10 + [True] * 10 + [False] * 10)
    probability = np.array([0.9, 0.1] * 10 + [0.95] * 10 + [0.6] * 10)
    sources = np.array(["a"] * 20 + ["r"] * 10 + ["c"] * 10)
    categories = np.array(["c"] * 20 + [BROAD_TOOL] * 10 + [BROAD_NONE] * 10)
    cuts = np.zeros((40, len(GRID)))
    cuts[20:] = 0.8 * np.asarray(GRID) if bank is None else bank
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
    bar = cutoff_on_broad(data, inner)
    assert bar.column is not None
    assert GRID[bar.column] == 0.8  # the lowest quantile whose cutoff (0.64) is over 0.6
    assert bar.margin == 0
    said = inner.probability >= inner.at(bar)
    assert np.array_equal(said, inner.labels)


def test_a_margin_parts_broad_rows_no_quantile_of_the_bank_reaches() -> None:
    """The bank scores 0.5 at every quantile, under the broad "no tool" rows' 0.6: no
    quantile parts them; 0.5 raised by 0.5 in log-odds (0.62) does, and 0.62 is the
    lowest such cutoff."""
    data, inner = _rows(np.full(len(GRID), 0.5))
    plain = cutoff_on_broad(data, inner)
    assert not np.array_equal(inner.probability >= inner.at(plain), inner.labels)
    bar = margin_on_broad(data, inner)
    assert bar.column is not None
    assert bar.margin == 0.5
    assert inner.at(bar)[-1] == pytest.approx(1 / (1 + np.exp(-0.5)))
    assert np.array_equal(inner.probability >= inner.at(bar), inner.labels)


def test_the_threshold_only_reads_the_real_rows_and_cuts_nothing() -> None:
    data, inner = _rows()
    bar = threshold_only(data, inner)
    assert bar.column is None
    assert 0.1 < bar.threshold <= 0.6  # the broad "no tool" rows are not what it was chosen on
