"""The gate's made rows against broad catalogs: tool requests with their gold tools among
tools of every other set, and requests that need no tool against such catalogs."""

from __future__ import annotations

import numpy as np
import pytest

from retriever.gate import broad
from retriever.gate.broad import BROAD_NONE, BROAD_TOOL, broad_rows
from retriever.gate.data import GateRow
from retriever.gate.features import SCALARS
from retriever.gate.train import Design, Options, fit


def _rows() -> tuple[list[GateRow], dict[tuple[str, str], tuple[str, ...]]]:
    rows, gold = [], {}
    for source in ("sgd", "tooltalk", "bfcl"):
        catalog = tuple(f"{source}_{i}: tool {i} of {source}" for i in range(30))
        for i in range(5):
            rows.append(GateRow(f"q{i}", source, "tool_call", f"{source} {i}", True, catalog))
            gold[source, f"q{i}"] = (catalog[i],)
    for source in ("chitchat", "nq_open", "clinc150"):
        rows.append(GateRow("n1", source, "chitchat", f"hi from {source}", False, ("x: y",)))
    rows.append(GateRow("n2", "clinc150", "out_of_scope", "dim my screen", False, ("x: y",)))
    return rows, gold


def test_tool_requests_meet_their_gold_tools_among_every_other_sets(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(broad, "SIZE", 40)
    rows, gold = _rows()
    made = broad_rows(rows, gold, seed=13)
    asked = [r for r in made if r.category == BROAD_TOOL]
    assert {r.source for r in asked} == {"sgd", "tooltalk"}  # the retrieval sets only
    for row in asked:
        assert gold[row.source, row.id.split("#")[0]][0] in row.catalog
        assert row.needs_tool
        assert row.augmented
        assert len(row.catalog) == 40
        others = {document.split("_")[0] for document in row.catalog} - {row.source}
        assert others == {"sgd", "tooltalk", "bfcl"} - {row.source}
    assert made == broad_rows(rows, gold, seed=13)
    assert made != broad_rows(rows, gold, seed=14)


def test_requests_needing_no_tool_meet_a_broad_catalog(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(broad, "SIZE", 40)
    rows, gold = _rows()
    none = [r for r in broad_rows(rows, gold, seed=13) if r.category == BROAD_NONE]
    # chit-chat, NQ-open and CLINC150's small talk; not its out-of-scope requests (some of
    # which a broad catalog may serve)
    assert sorted(r.query for r in none) == sorted(
        f"hi from {s}" for s in ("chitchat", "nq_open", "clinc150")
    )
    assert all(len(r.catalog) == 40 and not r.needs_tool and r.augmented for r in none)


def test_a_fit_without_the_broad_rows_leaves_them_out() -> None:
    rng = np.random.default_rng(0)
    rows = 40
    categories = np.array(["c", BROAD_NONE] * (rows // 2))
    data = Design(
        scalars=rng.normal(size=(rows, len(SCALARS))),
        queries=rng.normal(size=(rows, 8)),
        labels=rng.random(rows) > 0.5,
        sources=np.array(["a", "a", "b", "b"] * (rows // 4)),
        has_catalog=np.ones(rows, dtype=bool),
        categories=categories,
        augmented=categories == BROAD_NONE,
    )
    options = Options(steps=20, coverage=False, broad=False)
    without = fit(data, options, "enc", ["a", "b"]).spec
    assert without == fit(data.subset(categories == "c"), options, "enc", ["a", "b"]).spec
    assert without != fit(data, Options(steps=20, coverage=False), "enc", ["a", "b"]).spec
