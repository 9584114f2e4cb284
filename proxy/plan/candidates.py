"""Candidate tools for one sub-task: retrieval for roots, the graph for dependents.

A sub-task that needs nothing gets the retriever's top K over the catalog (hybrid:
dense + BM25). A dependent one gets the out-neighbours of the tools chosen for the
sub-tasks it needs (their union), filtered to its category, each scored by its
cosine similarity to the sub-task text plus a bonus for the edge that reached it
(STRONG_DEP > WEAK_DEP > SEQUENTIAL, scaled by the edge's weight); the best K are
kept and, when the graph offers fewer than K, retrieval tops the list up.

``mode="blend"`` is the variant measured beside it in proxy/plan/README.md: the
neighbours and the retriever's top K compete on one score (similarity + edge bonus)
instead of the neighbours coming first. ``mode="rerank"`` (the default) keeps
retrieval's order as the base and moves a tool up by the evidence of its edge, weighed
by :class:`~proxy.plan.trust.EdgeTrust`: an uninformative graph leaves retrieval as is.

A finder :meth:`~CandidateFinder.scoped` to some tools (a client key's tool scope) lists
only those, from retrieval (a mask on the index) and from the graph alike: a tool
outside it is never a candidate, so it is never shown to the model nor planned. A finder
made :meth:`~CandidateFinder.learned` for one tenant weighs each edge by that
tenant's observed runs instead (:class:`~proxy.plan.trust.LiveEvidence`), and offers the
tools observed after a chosen one even where the graph has no edge. A finder
:meth:`~CandidateFinder.with_traffic` adds to retrieval's fused scores what the tenant's
served queries vote for (:class:`TrafficVotes`, :mod:`proxy.learning.traffic`); a tool
without a vote keeps exactly its score.
"""

from __future__ import annotations

import copy
import heapq
import math
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal, Protocol

import numpy as np

from graph_store.models import ALL_KINDS, Edge, EdgeKind, ToolRef
from graph_store.store import GraphStore, neighbors
from proxy.plan.model import Candidate
from proxy.plan.order import TextOrder
from proxy.plan.trust import DECLARED_ORIGINS, EdgeTrust, LiveEvidence, load_trust
from retriever.clauses import with_clauses
from retriever.dense import Mask
from retriever.embedder import Vectors
from retriever.encoder import Encoder
from retriever.index import RERANK_DEPTH as RERANKED
from retriever.index import Hit, ToolIndex

if TYPE_CHECKING:
    from proxy.config import PlannerSettings

GraphMode = Literal["strict", "blend", "rerank"]

#: Share of a list of K that retrieval's first tools always hold in rerank mode (the
#: graph re-ranks them and fills the rest).
KEEP_RETRIEVED = 0.5
#: A graph joining more than this share of the catalog's ordered tool pairs is *dense*:
#: it re-ranks retrieval's K but adds no tool to them. An edge there is little evidence
#: (DailyLife joins every pair, the TaskBench HuggingFace and Multimedia graphs 44 % and
#: 29 %; UltraTool's 0.9 %), and at K = 3 its few specific edges pushed a right tool out
#: of the HuggingFace and Multimedia lists. Set at one pair in ten, not fitted.
DENSE_GRAPH = 0.1

DEFAULT_BONUS: Mapping[EdgeKind, float] = {
    EdgeKind.STRONG_DEP: 0.3,
    EdgeKind.WEAK_DEP: 0.2,
    EdgeKind.SEQUENTIAL: 0.1,
}


@dataclass(frozen=True)
class GraphWeights:
    bonus: Mapping[EdgeKind, float]
    #: Share of the bonus that depends on the edge's weight (the rest is its kind's).
    weight_share: float = 0.5

    def of(self, kind: EdgeKind, weight: float) -> float:
        return self.bonus[kind] * (1.0 - self.weight_share + self.weight_share * weight)


class TrafficVotes(Protocol):
    """One tenant's served queries (:class:`proxy.learning.traffic.ServedQueries`)."""

    @property
    def version(self) -> int:
        """Changes whenever the votes may (retrieval lists are kept per version)."""
        ...

    def bonuses(self, query: Vectors) -> Mapping[str, float]:
        """What to add to each tool's fused score for ``query`` (by tool name); a tool
        absent gets nothing."""
        ...


def weights_from(planner: PlannerSettings) -> GraphWeights:
    return GraphWeights(
        {
            EdgeKind.STRONG_DEP: planner.strong_bonus,
            EdgeKind.WEAK_DEP: planner.weak_bonus,
            EdgeKind.SEQUENTIAL: planner.sequential_bonus,
        }
    )


class CandidateFinder:
    """Search over one catalog: its graph store and its in-process index."""

    def __init__(
        self,
        store: GraphStore,
        index: ToolIndex,
        weights: GraphWeights | None = None,
        mode: GraphMode = "strict",
        beam_share: float = 0.5,
        trust: EdgeTrust | None = None,
        keep: float = KEEP_RETRIEVED,
        clauses: Encoder | None = None,
    ) -> None:
        """``clauses``: the encoder that embeds a searched text's clauses when a search
        also reads them (``retriever.clauses``, :mod:`retriever.clauses`; the proxy
        passes the planner's); None searches the whole text's vector alone."""
        self.store = store
        self.index = index
        self.weights = weights or GraphWeights(DEFAULT_BONUS)
        self.mode = mode
        self.beam_share = beam_share
        self.keep = keep
        self.clauses = clauses
        self._row = {doc.id: i for i, doc in enumerate(index.documents)}
        self._name = {doc.id: doc.name for doc in index.documents}
        self._id_of = {doc.name: doc.id for doc in index.documents}
        self._category = {doc.id: doc.category for doc in index.documents}
        #: One tenant's observed evidence (:meth:`learned`); None: the offline trust alone.
        self.live: LiveEvidence | None = None
        #: One tenant's served queries (:meth:`with_traffic`); None: retrieval as is.
        self.traffic: TrafficVotes | None = None
        self._specificity: dict[str, float] = {}
        self.trust = trust or (load_trust() if mode == "rerank" else None)
        self._retrieved: OrderedDict[tuple[str, int, str | None, bytes, int], tuple[Candidate, ...]]
        self._retrieved = OrderedDict()
        self._lock = threading.Lock()
        self._degree: dict[tuple[str, EdgeKind, bool | None], int] = {}
        self._order: TextOrder | None = None
        self._density: float | None = None
        self._allowed: frozenset[str] | None = None  # tool ids; None: the whole catalog
        self._within: Mask | None = None  # the same, as index rows

    def scoped(self, allowed: frozenset[str]) -> CandidateFinder:
        """This finder over the tools ``allowed`` (ids) alone: every list it makes holds
        none of the others. It shares this one's catalog-wide counts, not its lists."""
        finder = copy.copy(self)
        finder._allowed = allowed
        finder._within = np.fromiter(
            (doc.id in allowed for doc in self.index.documents),
            dtype=np.bool_,
            count=len(self.index.documents),
        )
        finder._retrieved = OrderedDict()
        return finder

    def _offers(self, tool_id: str) -> bool:
        """Whether ``tool_id`` may be a candidate: in the index, and in the scope."""
        return tool_id in self._row and (self._allowed is None or tool_id in self._allowed)

    def learned(self, live: LiveEvidence) -> CandidateFinder:
        """This finder re-ranking with ``live`` evidence (one tenant's, for one request);
        its caches are shared, as nothing in them depends on the evidence."""
        finder = copy.copy(self)
        finder.live = live
        return finder

    def with_traffic(self, traffic: TrafficVotes) -> CandidateFinder:
        """This finder adding ``traffic``'s votes to retrieval's scores (one tenant's),
        with lists of its own (its searches never evict the catalog's kept lists)."""
        finder = copy.copy(self)
        finder.traffic = traffic
        finder._retrieved = OrderedDict()
        return finder

    def text_order(self, encoder: Encoder) -> TextOrder | None:
        """The order evidence of shared texts (:mod:`proxy.plan.order`) in rerank mode,
        when the trust gives it a weight; made once per finder."""
        if self.mode != "rerank" or self.trust is None or self.trust.order <= 0:
            return None
        with self._lock:
            if self._order is None or self._order.encoder is not encoder:
                self._order = TextOrder(encoder, self.index, self.trust.order)
            return self._order

    def specificity(self, tool_id: str) -> float:
        """1 - the share of the catalog one edge away from ``tool_id``: an edge out of a
        tool joined to everything says nothing (DailyLife's graph is nearly complete)."""
        if tool_id not in self._specificity:
            reached = len(neighbors(self.store, [tool_id]))
            self._specificity[tool_id] = 1.0 - reached / max(1, len(self._row) - 1)
        return self._specificity[tool_id]

    def similarities(self, vector: Vectors) -> Mapping[str, float]:
        """Cosine similarity by tool id, each computed when first read: a list reads a
        few hundred rows at most, and the whole catalog's product cost 3.7 ms idle over
        47k tools, once per sub-task and twice for a dependent one. With
        several rows (:meth:`query`), a tool's best row's."""
        return _ScoreView(self._row, self.index, vector)

    def query(self, text: str, vector: Vectors) -> Vectors:
        """What a search for ``text`` reads: ``vector`` (the whole text's), and with
        :attr:`clauses` the rows of its clauses under it; a text of one clause is
        ``vector`` alone and embeds nothing more."""
        if self.clauses is None:
            return vector
        return with_clauses(self.clauses, text, vector)

    def retrieve(
        self, text: str, vector: Vectors, k: int, category: str | None = None
    ) -> list[Candidate]:
        """Retrieval's top ``k``, ``category``'s tools first and the whole catalog's after
        them when the category holds fewer; the last few lists are kept, since the joint
        search of :func:`proxy.plan.policy.plan_without_llm` asks for one sub-task's
        several times."""
        version = 0 if self.traffic is None else self.traffic.version
        key = (text, k, category, np.asarray(vector).tobytes(), version)
        with self._lock:
            held = self._retrieved.get(key)
            if held is not None:
                self._retrieved.move_to_end(key)
                return list(held)
        query = self.query(text, vector)
        sims = self.similarities(query)
        bonuses = self.traffic.bonuses(query) if self.traffic is not None else {}
        # votes may lift a tool from deeper in the list: the reranker's depth (its order
        # is the list's); the fusion's 100 cost 1 ms more a search over 3,224 tools
        depth = k if not bonuses else max(k, RERANKED)
        hits = self._hits(query, text, depth, category)
        plain = {hit.id for hit in hits[:k]}
        if bonuses:
            hits = self._voted(hits, bonuses, category, k)
        found = [
            Candidate(
                hit.name,
                hit.id,
                sims[hit.id],
                sims[hit.id],
                "retrieval" if hit.id in plain else "learned",
            )
            for hit in hits
        ]
        with self._lock:
            self._retrieved[key] = tuple(found)
            while len(self._retrieved) > RETRIEVED_KEPT:
                self._retrieved.popitem(last=False)
        return found

    def _hits(self, query: Vectors, text: str, k: int, category: str | None) -> list[Hit]:
        within = self._within
        hits = self.index.search(query, text, k, method="hybrid", category=category, within=within)
        if category is not None and len(hits) < k:
            # A category of fewer than k tools is a hint, not a wall: the rest of the
            # list comes from the whole catalog (a "Database" step must still see a
            # database pack's tools when the model named ToolBench's category).
            seen = {hit.id for hit in hits}
            wider = self.index.search(query, text, k, method="hybrid", within=within)
            hits += [hit for hit in wider if hit.id not in seen][: k - len(hits)]
        return hits

    def _voted(
        self, hits: Sequence[Hit], bonuses: Mapping[str, float], category: str | None, k: int
    ) -> list[Hit]:
        """The best ``k`` of ``hits`` with each voted tool's bonus added (ties keep
        retrieval's order). A voted tool beyond the list enters at the list's last score:
        an upper bound of its own fused score."""
        floor = hits[-1].score if hits else 0.0
        listed = {hit.id for hit in hits}
        pool = list(hits)
        for name in bonuses:
            tool_id = self._id_of.get(name)
            if tool_id is None or tool_id in listed or not self._offers(tool_id):
                continue
            if category is not None and self._category[tool_id] != category:
                continue
            doc = self.index.documents[self._row[tool_id]]
            pool.append(Hit(doc.id, doc.name, doc.category, doc.group, floor))
        scored = [(-(hit.score + bonuses.get(hit.name, 0.0)), i) for i, hit in enumerate(pool)]
        best = heapq.nsmallest(k, scored)
        return [replace(pool[i], score=-negated) for negated, i in best]

    def find(
        self,
        text: str,
        vector: Vectors,
        k: int,
        *,
        after: Sequence[str] = (),
        beam: Sequence[str] = (),
        category: str | None = None,
        use_graph: bool = True,
    ) -> list[Candidate]:
        """The top ``k`` candidates; ``after`` holds the ids of the tools chosen for the
        sub-tasks this one needs, ``beam`` the runners-up there, whose neighbours get
        ``beam_share`` of the edge bonus (a hedge against a wrong pick before)."""
        if self.mode == "rerank" and use_graph:
            if after:
                return self._rerank(text, vector, k, after, beam, category)
            return self._ranked(self.retrieve(text, vector, k, category))
        retrieved = self.retrieve(text, vector, k, category)
        if not after or not use_graph:
            return retrieved
        sims = self.similarities(self.query(text, vector))
        best: dict[str, Candidate] = {}
        sources = [(after, 1.0), ([b for b in beam if b not in after], self.beam_share)]
        for starts, share in sources:
            for n in neighbors(self.store, starts, category=category) if starts else []:
                if not self._offers(n.tool_id):
                    continue
                bonus = self.weights.of(n.kind, n.weight) * self.specificity(n.via) * share
                candidate = Candidate(
                    tool=n.name,
                    tool_id=n.tool_id,
                    score=sims[n.tool_id] + bonus,
                    similarity=sims[n.tool_id],
                    source="graph",
                    edge=n.kind,
                    weight=n.weight,
                    via=self._name.get(n.via, n.via),
                )
                held = best.get(n.tool_id)
                if held is None or candidate.score > held.score:
                    best[n.tool_id] = candidate
        reached = sorted(best.values(), key=lambda c: (-c.score, c.tool))
        if self.mode == "blend":
            pool = {c.tool_id: c for c in retrieved}
            pool.update({c.tool_id: c for c in reached})
            return sorted(pool.values(), key=lambda c: (-c.score, c.tool))[:k]
        chosen = reached[:k]
        taken = {c.tool_id for c in chosen}
        chosen += [c for c in retrieved if c.tool_id not in taken][: k - len(chosen)]
        return chosen

    def _rerank(
        self,
        text: str,
        vector: Vectors,
        k: int,
        after: Sequence[str],
        beam: Sequence[str],
        category: str | None,
    ) -> list[Candidate]:
        """Retrieval's rank prior plus edge evidence; ties keep retrieval's order."""
        assert self.trust is not None
        pool = self._ranked(self.retrieve(text, vector, RERANK_DEPTH, category))
        rank = {c.tool_id: i for i, c in enumerate(pool)}
        scored = {c.tool_id: (c.score, c) for c in pool}
        sims = self.similarities(self.query(text, vector))
        sources = [(after, 1.0), ([b for b in beam if b not in after], self.beam_share)]
        for starts, share in sources:
            start = set(starts)
            joined: set[tuple[str, str]] = set()  # the pairs the graph joins
            for edge, other in self.store.edge_rows(start, ALL_KINDS, "out") if start else []:
                joined.add((edge.src, other.id))
                if other.id in start or not self._offers(other.id):
                    continue
                if category is not None and other.category != category:
                    continue
                offline = self.trust.evidence(
                    edge.kind,
                    self.degree(edge.src, edge.kind, edge.origin),
                    len(self._row),
                    edge.origin,
                )
                nats = share * self._observed(edge.src, other.id, offline)
                score = self.trust.prior(rank.get(other.id, len(pool))) + nats
                if nats > 0 and score > scored.get(other.id, (-math.inf, None))[0]:
                    scored[other.id] = (
                        score,
                        _edge_candidate(edge, other, score, sims[other.id], self._name),
                    )
            for found in self._learned_successors(start, joined, share, category, sims):
                score = self.trust.prior(rank.get(found.tool_id, len(pool))) + found.score
                if score > scored.get(found.tool_id, (-math.inf, None))[0]:
                    scored[found.tool_id] = (score, replace(found, score=score))
        ordered = sorted(
            scored.values(), key=lambda item: (-item[0], rank.get(item[1].tool_id, len(pool)))
        )
        return kept_head([candidate for _, candidate in ordered], pool, k, self.kept(k))

    def _observed(self, source: str, target: str, offline: float) -> float:
        """An edge's nats as this finder's tenant observed them (``offline`` without)."""
        if self.live is None:
            return offline
        names, sure = self._name, self.trust.sure if self.trust else 1.0
        return self.live.nats(names[source], names[target], offline, len(self._row), sure)

    def _learned_successors(
        self,
        start: set[str],
        joined: set[tuple[str, str]],
        share: float,
        category: str | None,
        sims: Mapping[str, float],
    ) -> list[Candidate]:
        """The tools the tenant ran after one of ``start`` where the graph has no edge
        from it (not in ``joined``; such a pair's prior is no evidence: 0 nats), each
        scored by its nats."""
        if self.live is None:
            return []
        found = []
        for source in start:
            name = self._name.get(source, source)
            for target in self.live.successors(name):
                other = self._id_of.get(target)
                if other is None or other in start or (source, other) in joined:
                    continue
                if not self._offers(other):
                    continue
                if category is not None and self._category[other] != category:
                    continue
                sure = self.trust.sure if self.trust else 1.0
                nats = share * self.live.nats(name, target, 0.0, len(self._row), sure)
                if nats > 0:
                    found.append(Candidate(target, other, nats, sims[other], "learned", via=name))
        return found

    def kept(self, k: int) -> int:
        """How many of retrieval's first tools a list of ``k`` always holds: ``keep`` of
        them, all of them on a dense graph (when ``keep`` > 0)."""
        if self.keep > 0 and self.density() > DENSE_GRAPH:
            return k
        return min(k, math.ceil(self.keep * k - 1e-9))

    def density(self) -> float:
        """The share of the catalog's ordered tool pairs joined by an edge (any kind or
        origin), counted once per finder."""
        with self._lock:
            if self._density is None:
                pairs = {(e.src, e.dst) for e in self.store.edges() if e.src != e.dst}
                tools = len(self._row)
                self._density = len(pairs) / max(1, tools * (tools - 1))
            return self._density

    def _ranked(self, retrieved: list[Candidate]) -> list[Candidate]:
        """Retrieval's list scored by its log-prior over ranks (rerank mode's scale, where
        the scores of a plan's picks add up: see :func:`proxy.plan.policy.plan_without_llm`)."""
        assert self.trust is not None
        return [replace(c, score=self.trust.prior(i)) for i, c in enumerate(retrieved)]

    def degree(self, tool_id: str, kind: EdgeKind, origin: str = "") -> int:
        """How many tools one ``kind`` edge out of ``tool_id`` reaches; edges the catalog
        declares and edges toolgraph made are counted apart (their coverage differs)."""
        declared = self.trust is not None and self.trust.declared is not None
        group = origin in DECLARED_ORIGINS if declared else None
        key = (tool_id, kind, group)
        if key not in self._degree:
            self._degree[key] = len(
                {
                    other.id
                    for edge, other in self.store.edge_rows({tool_id}, [kind], "out")
                    if other.id != tool_id
                    and (group is None or (edge.origin in DECLARED_ORIGINS) == group)
                }
            )
        return self._degree[key]


def kept_head(
    ordered: Sequence[Candidate], retrieved: Sequence[Candidate], k: int, head: int
) -> list[Candidate]:
    """The first ``k`` of ``ordered``, except that retrieval's first ``head`` tools are
    always among them (each where its score puts it): the graph may re-rank them and
    fill the other places, never push them out."""
    must = {c.tool_id for c in retrieved[:head]}
    free = k - len(must)
    chosen: list[Candidate] = []
    for candidate in ordered:
        if len(chosen) == k:
            break
        if candidate.tool_id in must:
            chosen.append(candidate)
        elif free > 0:
            chosen.append(candidate)
            free -= 1
    return chosen


#: Retrieval lists a finder keeps (a request's sub-tasks, a few requests at once).
RETRIEVED_KEPT = 64

#: Depth of retrieval's list that re-ranking starts from (the fusion's own depth).
RERANK_DEPTH = 100


def _edge_candidate(
    edge: Edge, other: ToolRef, score: float, similarity: float, names: Mapping[str, str]
) -> Candidate:
    return Candidate(
        tool=other.name,
        tool_id=other.id,
        score=score,
        similarity=similarity,
        source="graph",
        edge=edge.kind,
        weight=edge.weight,
        via=names.get(edge.src, edge.src),
    )


class _ScoreView(Mapping[str, float]):
    """Cosine similarity by tool id, scored row by row as it is read."""

    def __init__(self, rows: Mapping[str, int], index: ToolIndex, query: Vectors) -> None:
        self._rows = rows
        self._index = index
        self._query = np.asarray(query, dtype=np.float32)
        self._scores: dict[str, float] = {}

    def __getitem__(self, key: str) -> float:
        score = self._scores.get(key)
        if score is None:
            score = self._scores[key] = self._index.similarity_of(self._query, self._rows[key])
        return score

    def __iter__(self) -> Iterator[str]:
        return iter(self._rows)

    def __len__(self) -> int:
        return len(self._rows)
