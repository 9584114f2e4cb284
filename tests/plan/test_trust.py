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
from proxy.plan.model import SubTask
from proxy.plan.policy import plan_without_llm
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


def test_declared_edges_take_their_own_coverage() -> None:
    trust = EdgeTrust({kind: 0.0 for kind in EdgeKind}, decay=1.0, declared=1.0)
    assert trust.evidence(EdgeKind.STRONG_DEP, 2, 200, origin="taskbench") == pytest.approx(
        math.log(100)
    )
    assert trust.evidence(EdgeKind.STRONG_DEP, 2, 200, origin="schema") == 0.0
    assert trust.evidence(EdgeKind.SEQUENTIAL, 2, 200, origin="calls") == 0.0
    doubtful = EdgeTrust({EdgeKind.SEQUENTIAL: 1.0}, decay=1.0, sure=0.5)
    assert doubtful.evidence(EdgeKind.SEQUENTIAL, 2, 200) == pytest.approx(math.log(50.5))
    assert doubtful.evidence(EdgeKind.SEQUENTIAL, 200, 200) == 0.0
    inferred_only = EdgeTrust({EdgeKind.SEQUENTIAL: 0.5}, decay=1.0)
    assert inferred_only.evidence(EdgeKind.SEQUENTIAL, 1, 10, origin="taskbench") == (
        pytest.approx(math.log(5))
    )
    assert load_trust().to_json() == json.loads(
        (Path(__file__).parents[2] / "proxy/plan/edge_trust.json").read_text()
    )


def chain(text: str) -> list[SubTask]:
    return [SubTask(id="s1", text=text), SubTask(id="s2", text=text, needs=("s1",))]


def test_the_joint_search_takes_the_root_the_next_tool_vouches_for(
    dataset: Dataset, index: ToolIndex, encoder: Encoder
) -> None:
    text = "reserve a hotel room"
    subtasks = chain(text)
    vectors = {t.id: encoder.encode([text])[0] for t in subtasks}
    finder = CandidateFinder(dataset.store, index, mode="rerank", trust=SURE)
    assert [c.tool for c in finder.retrieve(text, vectors["s1"], 2)] == [
        "book_hotel",
        "hotel_search",
    ]
    greedy = plan_without_llm(finder, subtasks, vectors, 5, width=1)
    joint = plan_without_llm(finder, subtasks, vectors, 5)
    assert greedy.choices["s1"] == "book_hotel"  # retrieval's first, then its neighbour
    # hotel_search is retrieval's second, but its only edge leads to book_hotel
    assert joint.choices == {"s1": "hotel_search", "s2": "book_hotel"}
    assert joint.links() == [("hotel_search", "book_hotel")]
    scores = [sum(d.candidates[[c.tool for c in d.candidates].index(d.chosen)].score
                  for d in p.decisions if d.chosen) for p in (greedy, joint)]  # fmt: skip
    assert scores[1] > scores[0]


def test_without_evidence_the_joint_search_keeps_the_greedy_picks(
    dataset: Dataset, index: ToolIndex, encoder: Encoder
) -> None:
    blind = EdgeTrust({kind: 0.0 for kind in EdgeKind}, decay=1.0)
    finder = CandidateFinder(dataset.store, index, mode="rerank", trust=blind)
    for text in ("reserve a hotel room", "book a flight and text my wife"):
        subtasks = [*chain(text), SubTask(id="s3", text=text, needs=("s2",))]
        vectors = {t.id: encoder.encode([text])[0] for t in subtasks}
        retrieved = [c.tool for c in finder.retrieve(text, vectors["s1"], 3)]
        joint = plan_without_llm(finder, subtasks, vectors, 5)
        assert [joint.choices[t.id] for t in subtasks] == retrieved
