"""Edge trust: evidence in nats, the shipped fit, and re-ranking that never buries
retrieval's hits on an uninformative graph."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from eval.plan_data import Dataset
from graph_store.models import EdgeKind
from proxy.cli import main
from proxy.plan.candidates import CandidateFinder
from proxy.plan.trust import EdgeTrust, load_trust
from retriever.embedder import Encoder
from retriever.index import ToolIndex

SURE = EdgeTrust({kind: 1.0 for kind in EdgeKind}, decay=1.0)


def tool_id(dataset: Dataset, name: str) -> str:
    found = dataset.store.get_tool(name)
    assert found is not None
    return found.id


def test_an_edge_to_everything_is_no_evidence() -> None:
    assert SURE.evidence(EdgeKind.SEQUENTIAL, degree=40, catalog=40) == 0.0
    assert SURE.evidence(EdgeKind.SEQUENTIAL, degree=2, catalog=200) == pytest.approx(math.log(100))
    unused = EdgeTrust({EdgeKind.SEQUENTIAL: 0.0}, decay=1.0)
    assert unused.evidence(EdgeKind.SEQUENTIAL, degree=1, catalog=200) == 0.0
    assert unused.evidence(EdgeKind.STRONG_DEP, degree=1, catalog=200) == 0.0


def test_the_shipped_fit_loads_and_a_broken_one_is_named(tmp_path: Path) -> None:
    shipped = load_trust()
    assert shipped.decay > 0
    assert set(shipped.coverage) == set(EdgeKind)
    broken = tmp_path / "trust.json"
    broken.write_text('{"coverage": {"SEQUENTIAL": 0.2}}')
    with pytest.raises(ValueError, match=r"trust\.json"):
        load_trust(broken)
    broken.write_text(json.dumps({"coverage": {"SEQUENTIAL": 1.5}, "decay": 1}))
    with pytest.raises(ValueError, match="coverage"):
        load_trust(broken)


def test_without_informative_edges_reranking_is_retrieval(
    dataset: Dataset, index: ToolIndex, encoder: Encoder
) -> None:
    text = "convert the price into euros"
    vector = encoder.encode([text])[0]
    blind = EdgeTrust({kind: 0.0 for kind in EdgeKind}, decay=1.0)
    finder = CandidateFinder(dataset.store, index, mode="rerank", trust=blind)
    reranked = finder.find(text, vector, 4, after=[tool_id(dataset, "book_hotel")])
    retrieved = finder.retrieve(text, vector, 4)
    assert [c.tool for c in reranked] == [c.tool for c in retrieved]


def test_a_sparse_edge_lifts_its_tool_and_keeps_the_rest_in_retrieval_order(
    dataset: Dataset, index: ToolIndex, encoder: Encoder
) -> None:
    text = "convert the price into euros"  # currency_convert is the closest text
    vector = encoder.encode([text])[0]
    finder = CandidateFinder(dataset.store, index, mode="rerank", trust=SURE)
    found = finder.find(text, vector, 3, after=[tool_id(dataset, "book_hotel")])
    assert found[0].tool == "send_sms"  # book_hotel's only neighbour, 1 of 10 tools
    assert (found[0].source, found[0].edge, found[0].via) == (
        "graph",
        EdgeKind.SEQUENTIAL,
        "book_hotel",
    )
    retrieved = [c.tool for c in finder.retrieve(text, vector, 3) if c.tool != "send_sms"]
    assert [c.tool for c in found[1:]] == retrieved[:2]


def test_eval_plan_scores_the_baseline_and_the_shipped_default_unless_told(
    taskbench_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "plan.json"
    code = main(
        ["eval", "plan", "--dataset", str(taskbench_dir), "--k", "3", "--json", str(out),
         "--cache-dir", str(tmp_path / "cache"), "--quiet"]
    )  # fmt: skip
    assert code == 0
    scores = json.loads(out.read_text())
    assert set(scores) == {"retrieval", "default"}
    assert scores["default"]["link_f1@3"] >= scores["retrieval"]["link_f1@3"]
