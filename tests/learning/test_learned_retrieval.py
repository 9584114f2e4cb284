"""Retrieval that learns from a tenant's traffic: the queries a tool served vote for it in
that tenant's searches alone; a tool with no vote keeps exactly today's score; one or two
requests move little; a rebuild that does worse on the held-out slice is rolled back; the
rebuild runs beside the request, never on it."""

from __future__ import annotations

import asyncio

from eval.plan_data import Dataset
from proxy.config import LearningSettings
from proxy.learning.feedback import Count, Key
from proxy.learning.retrieval import TrafficRetrieval
from proxy.learning.service import Learner
from proxy.learning.store import MemoryLearnedStore
from proxy.learning.traffic import Served, build_state, held_out
from proxy.plan.candidates import CandidateFinder
from retriever.embedder import Encoder
from retriever.index import ToolIndex

#: Requests about tracking a parcel, which no travel tool's document speaks of.
PARCELS = [
    "where is my parcel right now",
    "track the parcel I sent yesterday",
    "has my parcel been delivered yet",
    "show me the tracking status of my parcel",
    "I want to know where my parcel is",
    "track my parcel please",
    "my parcel has not arrived, where is it",
    "find out where the parcel is",
    "follow my parcel's delivery",
    "tell me the parcel's tracking status",
    "what is the status of my parcel",
    "is my parcel on its way",
]
ASKED = "could you track where my parcel is now"
SERVING = "send_sms"


def options(**changed: object) -> LearningSettings:
    return LearningSettings(enabled=True, **changed)  # type: ignore[arg-type]


def served(texts: list[str], tool: str, good: int = 1) -> dict[Key, Count]:
    return {("served", tool, text): (good, 0) for text in texts}


def listed(finder: CandidateFinder, encoder: Encoder, text: str = ASKED) -> list[str]:
    return [c.tool for c in finder.retrieve(text, encoder.encode([text])[0], 5)]


def state_of(encoder: Encoder, texts: list[str], tool: str, weight: float = 0.3) -> object:
    rows = [Served(tool, text, 1, 0) for text in texts]
    return build_state(rows, encoder.encode(texts), weight, 2.0)


def test_served_queries_lift_their_tool_for_a_similar_request(
    dataset: Dataset, index: ToolIndex, encoder: Encoder
) -> None:
    finder = CandidateFinder(dataset.store, index)
    today = listed(finder, encoder)
    assert today[0] != SERVING
    learned = finder.with_traffic(state_of(encoder, PARCELS, SERVING))  # type: ignore[arg-type]
    mine = learned.retrieve(ASKED, encoder.encode([ASKED])[0], 5)
    assert mine[0].tool == SERVING
    assert mine[0].source == ("retrieval" if SERVING in today else "learned")


def test_a_tool_without_votes_keeps_exactly_todays_score(
    dataset: Dataset, index: ToolIndex, encoder: Encoder
) -> None:
    finder = CandidateFinder(dataset.store, index)
    vector = encoder.encode([ASKED])[0]
    today = {hit.id: hit.score for hit in index.search(vector, ASKED, 100)}
    state = state_of(encoder, PARCELS, SERVING)
    learned = finder.with_traffic(state)  # type: ignore[arg-type]
    voted = learned._voted(index.search(vector, ASKED, 100), state.bonuses(vector), None, 100)  # type: ignore[attr-defined]
    names = {doc.id: doc.name for doc in index.documents}
    for hit in voted:
        if names[hit.id] != SERVING:
            assert hit.score == today[hit.id]
    assert (
        next(h.score for h in voted if h.name == SERVING)
        > today[next(i for i, n in names.items() if n == SERVING)]
    )
    # a request far from every served query: the same list, the same scores
    far = "book a flight to Paris for two"
    far_vector = encoder.encode([far])[0]
    assert state.bonuses(far_vector) == {}  # type: ignore[attr-defined]
    plain = finder.retrieve(far, far_vector, 5)
    assert learned.retrieve(far, far_vector, 5) == plain


def test_one_request_moves_a_tool_little_many_move_it_far(encoder: Encoder) -> None:
    vector = encoder.encode([ASKED])[0]
    one = build_state([Served(SERVING, PARCELS[0], 1, 0)], encoder.encode(PARCELS[:1]), 0.3, 2.0)
    many = state_of(encoder, PARCELS, SERVING)
    lifted = many.bonuses(vector)[SERVING]  # type: ignore[attr-defined]
    assert one.bonuses(vector).get(SERVING, 0.0) < lifted / 2
    assert lifted <= 0.3
    # weak negatives only: never below today's score
    beaten = build_state(
        [Served(SERVING, t, 0, 3) for t in PARCELS], encoder.encode(PARCELS), 0.3, 2.0
    )
    assert beaten.bonuses(vector) == {}


async def test_a_tenants_traffic_moves_its_own_search_and_no_others(
    dataset: Dataset, index: ToolIndex, encoder: Encoder
) -> None:
    learner = Learner(MemoryLearnedStore(1000, 10), options())
    finder = CandidateFinder(dataset.store, index)
    traffic = TrafficRetrieval(finder, encoder, learner)
    await learner.record("a", served(PARCELS, SERVING))
    await learner.record("b", served(PARCELS, "book_hotel"))
    # nothing built yet: today's search, a rebuild started beside the request
    assert traffic.current("a") is None
    assert traffic.current("b") is None
    assert traffic.current("c") is None
    await asyncio.gather(*traffic._running.values())
    mine, theirs, none = traffic.live("a"), traffic.live("b"), traffic.live("c")
    assert mine is not None
    assert theirs is not None
    assert none is not None
    today = listed(finder, encoder)
    assert listed(finder.with_traffic(mine), encoder)[0] == SERVING
    assert listed(finder.with_traffic(theirs), encoder)[0] == "book_hotel"
    assert len(none) == 0
    assert listed(finder.with_traffic(none), encoder) == today


async def test_a_rebuild_worse_on_the_held_out_queries_is_rolled_back(
    dataset: Dataset, index: ToolIndex, encoder: Encoder
) -> None:
    kept = [t for t in PARCELS if not held_out(t)]
    checked = [t for t in PARCELS if held_out(t)]
    extra = [f"{t} today" for t in PARCELS] + [f"{t}, thanks" for t in PARCELS]
    checked += [t for t in extra if held_out(t)]
    kept += [t for t in extra if not held_out(t)]
    assert checked
    assert kept
    learner = Learner(MemoryLearnedStore(1000, 10), options())
    traffic = TrafficRetrieval(CandidateFinder(dataset.store, index), encoder, learner)
    await learner.record("a", served(kept + checked, SERVING))
    first = await traffic.refresh("a")
    assert first.outcome == "swapped"
    good = traffic.live("a")
    # the same requests now said to be served, many times over, by another tool
    await learner.record("a", served(kept, "book_hotel", good=20))
    second = await traffic.refresh("a")
    assert second.outcome == "rolled_back"
    assert second.new < second.live
    assert traffic.live("a") is good


async def test_learning_off_reads_nothing_and_builds_nothing(
    dataset: Dataset, index: ToolIndex, encoder: Encoder
) -> None:
    for settings in (LearningSettings(enabled=False), options(retrieval=False)):
        learner = Learner(MemoryLearnedStore(1000, 10), settings)
        traffic = TrafficRetrieval(CandidateFinder(dataset.store, index), encoder, learner)
        await learner.store.add("a", served(PARCELS, SERVING))
        assert traffic.current("a") is None
        assert not traffic._running


async def test_the_planner_searches_with_the_asking_tenants_served_queries(
    dataset: Dataset, index: ToolIndex, encoder: Encoder
) -> None:
    from proxy.config import PlannerSettings
    from proxy.plan.planner import RequestPlanner

    states = {"a": state_of(encoder, PARCELS, SERVING)}
    finder = CandidateFinder(dataset.store, index, mode="rerank")
    planner = RequestPlanner(
        finder,
        encoder,
        PlannerSettings(policy="graph", top_k=5),
        traffic=states.get,  # type: ignore[arg-type]
    )

    async def offered(scope: str | None) -> list[str]:
        plan = await planner.plan(ASKED, None, scope)
        (decision,) = [d for d in plan.decisions if d.candidates]
        return [c.tool for c in decision.candidates]

    today = await offered(None)
    assert (await offered("a"))[0] == SERVING
    assert await offered("b") == today
    assert today[0] != SERVING
