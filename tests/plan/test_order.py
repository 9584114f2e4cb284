"""The order of a shared text's clauses as evidence, the lookahead of the joint search,
and retrieval's head kept in every re-ranked list."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval.plan_data import Dataset
from graph_store.embedded import InProcessStore
from graph_store.models import Edge, EdgeKind
from proxy.plan.candidates import DENSE_GRAPH, CandidateFinder, kept_head
from proxy.plan.model import Candidate, SubTask
from proxy.plan.order import TextOrder, split_clauses
from proxy.plan.policy import plan_without_llm
from proxy.plan.trust import EdgeTrust, load_trust
from retriever.embedder import Encoder
from retriever.index import ToolIndex

#: Retrieval ranks send_sms first for this text, though the text asks for it last.
LATE_SMS = "Check the stock price of Apple and then send a text message to Bob"
#: No edge evidence at all: only the rank prior and the order evidence.
BLIND = {kind: 0.0 for kind in EdgeKind}


def tool_id(dataset: Dataset, name: str) -> str:
    found = dataset.store.get_tool(name)
    assert found is not None
    return found.id


def test_clauses_split_at_sentences_and_joining_words_and_keep_arguments_whole() -> None:
    assert split_clauses("Deliver a gift to London, UK. Then, book a flight and text my wife") == [
        "Deliver a gift to London, UK",
        "book a flight",
        "text my wife",
    ]
    assert split_clauses("What is Apple's share price?") == ["What is Apple's share price"]
    assert split_clauses("") == []


def test_a_later_clause_is_evidence_for_the_order_and_an_earlier_one_against(
    dataset: Dataset, index: ToolIndex, encoder: Encoder
) -> None:
    order = TextOrder(encoder, index, 1.5)
    stock, sms = tool_id(dataset, "stock_query"), tool_id(dataset, "send_sms")
    assert order.evidence(LATE_SMS, stock, sms) == 1.5
    assert order.evidence(LATE_SMS, sms, stock) == -1.5
    assert order.evidence("Send a text message to Bob", stock, sms) == 0.0  # one clause
    assert order.evidence(LATE_SMS, stock, "no-such-tool") == 0.0


def chain(text: str, length: int) -> list[SubTask]:
    return [
        SubTask(id=f"s{i}", text=text, needs=(f"s{i - 1}",) if i > 1 else ())
        for i in range(1, length + 1)
    ]


def test_the_order_of_a_shared_text_orders_the_picks_on_a_graph_that_cannot(
    dataset: Dataset, index: ToolIndex, encoder: Encoder
) -> None:
    finder = CandidateFinder(dataset.store, index, mode="rerank", trust=EdgeTrust(BLIND, 1.0))
    subtasks = chain(LATE_SMS, 2)
    vectors = {t.id: encoder.encode([LATE_SMS])[0] for t in subtasks}
    assert [c.tool for c in finder.retrieve(LATE_SMS, vectors["s1"], 2)] == [
        "send_sms",
        "stock_query",
    ]
    without = plan_without_llm(finder, subtasks, vectors, 5)
    assert without.links() == [("send_sms", "stock_query")]  # retrieval's order
    ordered = plan_without_llm(finder, subtasks, vectors, 5, order=TextOrder(encoder, index, 1.0))
    assert ordered.links() == [("stock_query", "send_sms")]


def test_order_counts_only_between_sub_tasks_that_share_a_text(
    dataset: Dataset, index: ToolIndex, encoder: Encoder
) -> None:
    finder = CandidateFinder(dataset.store, index, mode="rerank", trust=EdgeTrust(BLIND, 1.0))
    subtasks = [
        SubTask(id="s1", text=LATE_SMS),
        SubTask(id="s2", text=LATE_SMS + ".", needs=("s1",)),  # another text
    ]
    vectors = {t.id: encoder.encode([LATE_SMS])[0] for t in subtasks}
    plan = plan_without_llm(finder, subtasks, vectors, 5, order=TextOrder(encoder, index, 1.0))
    assert plan.links() == [("send_sms", "stock_query")]


def test_a_three_step_chain_follows_the_text_though_retrieval_ranks_its_last_tool_first(
    dataset: Dataset, index: ToolIndex, encoder: Encoder
) -> None:
    """Three sub-tasks on one text whose first step retrieval ranks last, so the right plan
    starts from retrieval's third choice. Retrieval's first two are nearly tied and swap
    between CPUs' int8 kernels; the test holds for either order."""
    text = "Find flights to Paris, then book a seat on the flight, then send an sms to Bob"
    subtasks = chain(text, 3)
    vectors = {t.id: encoder.encode([text])[0] for t in subtasks}
    finder = CandidateFinder(dataset.store, index, mode="rerank", trust=EdgeTrust(BLIND, 1.0))
    order = TextOrder(encoder, index, 3.0)
    ranked = [c.tool for c in finder.retrieve(text, vectors["s1"], 3)]
    assert sorted(ranked[:2]) == ["book_flight", "send_sms"]
    assert ranked[2] == "flight_search"
    plan = plan_without_llm(finder, subtasks, vectors, 5, width=3, order=order)
    assert [plan.choices[t.id] for t in subtasks] == ["flight_search", "book_flight", "send_sms"]
    greedy = plan_without_llm(finder, subtasks, vectors, 5, width=1, order=order)
    assert [greedy.choices[t.id] for t in subtasks] == ranked


def candidate(name: str) -> Candidate:
    return Candidate(name, name, 0.0, 0.0, "retrieval")


def test_retrievals_head_stays_in_the_list_whatever_the_graph_says() -> None:
    retrieved = [candidate(n) for n in "abcde"]
    ordered = [candidate(n) for n in "xyzcab"]  # the graph's x, y, z ranked first
    assert [c.tool for c in kept_head(ordered, retrieved, 3, 2)] == ["x", "a", "b"]
    assert [c.tool for c in kept_head(ordered, retrieved, 3, 0)] == ["x", "y", "z"]
    assert [c.tool for c in kept_head(ordered, retrieved, 3, 3)] == ["c", "a", "b"]


def test_a_reranked_list_keeps_retrievals_first_half(
    dataset: Dataset, index: ToolIndex, encoder: Encoder
) -> None:
    sure = EdgeTrust({kind: 1.0 for kind in EdgeKind}, decay=0.1)  # edges beat any rank
    text = "convert the price into euros"
    vector = encoder.encode([text])[0]
    after = [tool_id(dataset, "flight_search")]  # two neighbours, both far from the text
    retrieved = [c.tool for c in CandidateFinder(dataset.store, index).retrieve(text, vector, 2)]
    for keep, kept in ((0.0, 0), (0.5, 1), (1.0, 2)):
        finder = CandidateFinder(dataset.store, index, mode="rerank", trust=sure, keep=keep)
        found = [c.tool for c in finder.find(text, vector, 2, after=after)]
        assert set(retrieved[:kept]) <= set(found)
        assert len(set(found) - set(retrieved)) == 2 - kept


def test_the_shipped_fit_carries_a_positive_order_and_a_negative_one_is_refused(
    tmp_path: Path,
) -> None:
    assert load_trust().order > 0
    broken = tmp_path / "trust.json"
    broken.write_text(json.dumps({"coverage": {"SEQUENTIAL": 0.5}, "decay": 1, "order": -1}))
    with pytest.raises(ValueError, match="order"):
        load_trust(broken)


def test_on_a_dense_graph_the_list_is_retrievals_own_tools_reranked(
    dataset: Dataset, index: ToolIndex, encoder: Encoder
) -> None:
    store = InProcessStore()
    store.upsert_tools(dataset.tools)
    ids = [tool.id for tool in dataset.tools]
    store.upsert_edges(
        [Edge(src=a, dst=b, kind=EdgeKind.SEQUENTIAL, weight=1.0, origin="calls") for a in ids for b in ids
         if a != b and b != tool_id(dataset, "flight_search")]
    )  # fmt: skip
    sure = EdgeTrust({kind: 1.0 for kind in EdgeKind}, decay=0.1)
    text = "convert the price into euros"
    vector = encoder.encode([text])[0]
    sparse = CandidateFinder(dataset.store, index, mode="rerank", trust=sure)
    dense = CandidateFinder(store, index, mode="rerank", trust=sure)
    assert sparse.density() < DENSE_GRAPH < dense.density()
    retrieved = [c.tool for c in dense.retrieve(text, vector, 3)]
    found = dense.find(text, vector, 3, after=[tool_id(dataset, "book_hotel")])
    assert {c.tool for c in found} == set(retrieved)
    lifted = sparse.find(text, vector, 3, after=[tool_id(dataset, "book_hotel")])
    assert {c.tool for c in lifted} != set(retrieved)  # send_sms, book_hotel's neighbour
