"""The planner's re-ranking reads the asking tenant's observed edges and no other's: what
one tenant ran moves its own lists, another tenant's lists stay exactly today's."""

from __future__ import annotations

from dataclasses import replace

from eval.plan_data import Dataset
from proxy.config import LearningSettings
from proxy.execute.plan import PlanNode
from proxy.execute.scheduler import CallRecord, Outcome, PlanRun
from proxy.learning.service import Learner
from proxy.learning.store import MemoryLearnedStore
from proxy.plan.candidates import CandidateFinder
from proxy.plan.model import Plan, SubTask
from proxy.plan.trust import load_trust
from retriever.embedder import Encoder
from retriever.index import ToolIndex

TEXT = "Take care of the next part of the trip"


def ran(first: str, second: str) -> tuple[Plan, PlanRun]:
    """A run in which ``second`` ran on the output of ``first``, both succeeding."""
    tasks = [SubTask(id="s1", text="one"), SubTask(id="s2", text="two", needs=("s1",))]
    nodes = [PlanNode(id="s1", tool=first), PlanNode(id="s2", tool=second, needs=("s1",))]
    records = {node.id: CallRecord(node, Outcome.OK) for node in nodes}
    return Plan(tasks, {"s1": first, "s2": second}, "llm"), PlanRun(records)


def tool_id(dataset: Dataset, name: str) -> str:
    return next(tool.id for tool in dataset.tools if tool.name == name)


async def test_a_tenants_runs_move_its_own_lists_and_no_others(
    dataset: Dataset, index: ToolIndex, encoder: Encoder
) -> None:
    learner = Learner(MemoryLearnedStore(100, 10), LearningSettings(enabled=True))
    for _ in range(30):
        await learner.observe_run("a", *ran("book_flight", "currency_convert"))
    await learner.observe_run("b", *ran("book_flight", "stock_query"))
    # every pick taken as right (sure = 1): the ten-tool catalog caps the evidence low else
    trust = replace(load_trust(), sure=1.0)
    finder = CandidateFinder(dataset.store, index, mode="rerank", keep=0.0, trust=trust)
    vector = encoder.encode([TEXT])[0]
    after = [tool_id(dataset, "book_flight")]

    def listed(tenant: str | None, live: object = None) -> list[tuple[str, str]]:
        used = finder if live is None else finder.learned(live)  # type: ignore[arg-type]
        return [(c.tool, c.source) for c in used.find(TEXT, vector, 3, after=after)]

    today = listed(None)
    mine = listed("a", await learner.evidence("a"))
    assert ("currency_convert", "learned") in mine
    assert "currency_convert" not in [tool for tool, _ in today]
    assert await learner.evidence("c") is None  # a tenant that never ran: today's lists
    assert listed("b", await learner.evidence("b")) != mine


async def test_learning_off_for_a_tenant_neither_records_nor_reads() -> None:
    store = MemoryLearnedStore(100, 10)
    learner = Learner(store, LearningSettings(enabled=True, off_tenants=["b"]))
    await learner.observe_run("b", *ran("book_flight", "send_sms"))
    assert await store.counts("b") == {}
    await store.add("b", {("edge", "book_flight", "send_sms"): (5, 0)})
    assert await learner.evidence("b") is None
    off = Learner(store, LearningSettings(enabled=False))
    await off.observe_run("a", *ran("book_flight", "send_sms"))
    assert await store.counts("a") == {}


async def test_a_tenants_evidence_is_read_again_after_a_write_or_the_refresh() -> None:
    store, now = MemoryLearnedStore(100, 10), [0.0]
    learner = Learner(store, LearningSettings(enabled=True, refresh=30), clock=lambda: now[0])
    assert await learner.evidence("a") is None
    await store.add("a", {("edge", "x", "y"): (1, 0)})  # another replica's write
    assert await learner.evidence("a") is None  # within the refresh: as read
    now[0] = 30.0
    seen = await learner.evidence("a")
    assert seen is not None
    assert list(seen.successors("x")) == ["y"]
    await learner.observe_run("a", *ran("book_flight", "send_sms"))  # its own: at once
    seen = await learner.evidence("a")
    assert seen is not None
    assert list(seen.successors("book_flight")) == ["send_sms"]
