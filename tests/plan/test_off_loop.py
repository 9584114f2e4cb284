"""The planner never makes the event loop wait on the graph store.

The stores are real (the embedded one, and Neo4j's backend against ArcadeDB's Bolt
server), watched: every call of the ``GraphStore`` interface notes whether it ran on
the loop's own thread, and from a worker thread it has the loop run a coroutine
before it answers, which the loop can only do while it is free. A store call made
on the loop (Neo4j's network round trips) would hold every other stream of the worker.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest

from eval.plan_data import Dataset
from graph_store.embedded import InProcessStore
from graph_store.neo4j_store import Neo4jStore
from graph_store.store import GraphStore
from proxy.config import PlannerSettings
from proxy.llm import UpstreamModel
from proxy.plan.candidates import CandidateFinder, GraphMode
from proxy.plan.model import SubTask
from proxy.plan.planner import RequestPlanner
from retriever.embedder import Encoder
from retriever.index import ToolIndex
from testing.fake_upstream import FakeUpstream
from tests.plan._llm_policy import REQUEST, STEPS, pick, reply

#: The methods of the store interface, each watched.
INTERFACE = sorted(name for name in vars(GraphStore) if not name.startswith("_"))
S = TypeVar("S")


class Watch:
    """Which interface calls were made on the loop's thread (``on_loop``) and which
    off it (``off_loop``, each after the loop answered a coroutine meanwhile)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop, self.loop_thread = loop, threading.get_ident()
        self.on_loop: list[str] = []
        self.off_loop: set[str] = set()

    def check(self, name: str) -> None:
        if threading.get_ident() == self.loop_thread:
            self.on_loop.append(name)
            return
        # The loop runs this while the store call lasts, or the call never returns.
        asyncio.run_coroutine_threadsafe(asyncio.sleep(0), self.loop).result(timeout=120)
        self.off_loop.add(name)


def watched(backend: type[S]) -> type[S]:
    """``backend`` with each interface call checked by the instance's ``watch``, once set."""

    def wrap(name: str) -> Callable[..., Any]:
        real = getattr(backend, name)

        def call(self: Any, *args: Any, **kwargs: Any) -> Any:
            watch: Watch | None = getattr(self, "watch", None)
            if watch is not None:
                watch.check(name)
            return real(self, *args, **kwargs)

        return call

    return type(f"Watched{backend.__name__}", (backend,), {n: wrap(n) for n in INTERFACE})


@pytest.fixture(params=["in_process", "neo4j"])
def store(request: pytest.FixtureRequest, dataset: Dataset) -> Iterator[GraphStore]:
    """The dataset's catalog in a watched store of each backend."""
    if request.param == "in_process":
        store: GraphStore = watched(InProcessStore)()
    else:
        store = watched(Neo4jStore).from_uri(request.getfixturevalue("bolt_uri"))
        store.clear()
    store.upsert_tools(dataset.store.list_tools())
    store.upsert_edges(dataset.store.edges())
    yield store
    if request.param == "neo4j":
        store.clear()
    store.close()


def watched_finder(store: GraphStore, index: ToolIndex, mode: GraphMode) -> CandidateFinder:
    store.watch = Watch(asyncio.get_running_loop())  # type: ignore[attr-defined]
    return CandidateFinder(store, index, mode=mode)


def calls(finder: CandidateFinder) -> tuple[list[str], set[str]]:
    watch = finder.store.watch  # type: ignore[attr-defined]
    assert isinstance(watch, Watch)
    return watch.on_loop, watch.off_loop


@pytest.mark.parametrize("mode", ["rerank", "strict"])
async def test_the_llm_policy_reads_the_store_only_off_the_loop(
    upstream: FakeUpstream,
    model: UpstreamModel,
    store: GraphStore,
    index: ToolIndex,
    encoder: Encoder,
    mode: GraphMode,
) -> None:
    finder = watched_finder(store, index, mode)
    upstream.enqueue(
        reply(STEPS),
        pick(1),
        pick(0, "none of these books a flight"),  # a backtrack, then picks again
        pick(1),
        pick(1),
        pick(1),
        reply({"verdict": "success", "reason": "fits"}),
    )
    planner = RequestPlanner(
        finder, encoder, PlannerSettings(profile="full", top_k=3, reflection_rounds=1, memory_k=0)
    )
    plan = await planner.plan(REQUEST, model)
    assert plan.policy == "llm"
    assert plan.choices.keys() == {"s1", "s2", "s3"}
    on_loop, off_loop = calls(finder)
    assert on_loop == []
    assert {"categories", "edge_rows", "get_tool"} <= off_loop


async def test_a_spent_step_budget_fills_the_rest_off_the_loop(
    upstream: FakeUpstream,
    model: UpstreamModel,
    store: GraphStore,
    index: ToolIndex,
    encoder: Encoder,
) -> None:
    finder = watched_finder(store, index, "rerank")
    upstream.enqueue(reply(STEPS), pick(1))
    planner = RequestPlanner(
        finder,
        encoder,
        PlannerSettings(profile="full", top_k=3, step_budget=1, reflection_rounds=0, memory_k=0),
    )
    plan = await planner.plan(REQUEST, model)
    assert [d.kind for d in plan.decisions] == ["pick", "fallback", "fallback"]
    on_loop, off_loop = calls(finder)
    assert on_loop == []
    assert "edge_rows" in off_loop


async def test_the_graph_policy_and_the_fallback_read_the_store_off_the_loop(
    upstream: FakeUpstream,
    model: UpstreamModel,
    store: GraphStore,
    index: ToolIndex,
    encoder: Encoder,
) -> None:
    finder = watched_finder(store, index, "rerank")
    graph = RequestPlanner(finder, encoder, PlannerSettings(policy="graph", top_k=3))
    subtasks = [SubTask.model_validate(step) for step in STEPS["subtasks"]]
    planned = await graph.plan_subtasks(REQUEST, subtasks, model)
    assert planned.policy == "graph"
    assert len(planned.choices) == 3
    upstream.enqueue(*[reply("not a plan")] * 3)  # decomposition fails: the fallback plans
    fallback = await RequestPlanner(finder, encoder, PlannerSettings(profile="full", top_k=3)).plan(
        REQUEST, model
    )
    assert fallback.policy == "graph"
    assert fallback.notes
    on_loop, off_loop = calls(finder)
    assert on_loop == []
    assert {"categories", "edge_rows", "get_tool"} <= off_loop
