"""How much an edge of the tool graph says about the next tool, in nats.

Retrieval ranks the catalog for a sub-task; an edge from the tool chosen before it is
evidence that its target comes next. We weigh that evidence as a likelihood ratio:
if a share ``c`` of real transitions A → B follow an edge of kind κ out of A
(the kind's *coverage*), and A has ``d`` such edges in a catalog of ``N`` tools, then
knowing "B is a κ-neighbour of A" multiplies B's odds by about ``c · N / d``. The
ratio is 1 (no evidence) for a tool joined to everything, which is why DailyLife's
complete graph changes nothing, and large for a sparse graph of observed sequences
such as UltraTool's. Only positive evidence is used: a missing edge never pushes a
retrieved tool down, so the graph adds and re-ranks but cannot bury retrieval's hits.

The ratio holds when A, the tool chosen before, is right; an edge out of a wrong pick
says nothing, so with a share ``sure`` of those picks right it becomes
``sure · c · N / d + (1 - sure)``. Edges a catalog declares in its own file (origin: an
import format) have their own coverage, ``declared``, apart from the edges toolgraph
makes (the schema rule pass, observed calls: ``coverage`` per kind).

Retrieval's own ranking is turned into a log-prior over ranks, ``-decay · log(1 + r)``,
and a candidate's score is that prior plus its edge evidence: with no informative
edge the order is retrieval's exactly.

Where sub-tasks share one text, the order of their tools' clauses in it is evidence
too (:mod:`proxy.plan.order`, ``order`` nats): the one signal left when the graph is
complete.

The coverage of each kind, ``sure``, the decay and ``order`` are fitted by
``python -m eval.plan_trust`` on training data only (CallNavi, API-Bank, ToolTalk
and BFCL multi-turn call sequences); ``declared`` is set there, not fitted (no
training set declares a graph). All are shipped in ``edge_trust.json`` beside this
module.
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from graph_store.ingest.catalog import FORMATS
from graph_store.models import EdgeKind

DEFAULT_PATH = Path(__file__).with_name("edge_trust.json")


#: Edge origins a catalog file states itself (its own graph: TaskBench's
#: ``graph_desc.json``, ToolBench's relations, ...), as opposed to edges toolgraph
#: infers (``schema``: the rule pass over schemas; ``llm``) or observes (``calls``).
DECLARED_ORIGINS = frozenset(FORMATS)


@dataclass(frozen=True)
class EdgeTrust:
    #: Share of real transitions that follow an edge of each kind that toolgraph made
    #: itself (the schema rule pass, observed call sequences; 0 = ignore the kind).
    coverage: Mapping[EdgeKind, float]
    #: How steeply retrieval's log-prior falls with rank (nats per log-rank).
    decay: float
    #: Share of real transitions that follow an edge the catalog declares (any kind);
    #: ``None``: as ``coverage``.
    declared: float | None = None
    #: Share of the picks an edge leaves from that are right: an edge out of a wrong
    #: pick says nothing, so the likelihood ratio is ``sure · c · N / d + (1 - sure)``.
    sure: float = 1.0
    #: Nats for "the next tool's clause comes later in the shared request text than the
    #: tool before's" (and minus that for earlier): :mod:`proxy.plan.order`. 0 = unused.
    order: float = 0.0

    def share(self, kind: EdgeKind, origin: str = "") -> float:
        """The coverage that applies to an edge of ``kind`` made by ``origin``."""
        if self.declared is not None and origin in DECLARED_ORIGINS:
            return self.declared
        return self.coverage.get(kind, 0.0)

    def evidence(self, kind: EdgeKind, degree: int, catalog: int, origin: str = "") -> float:
        """Nats for "this tool is a ``kind``-neighbour of the one before", never negative;
        ``degree`` counts the edges of the same kind and origin class leaving that tool."""
        share = self.share(kind, origin)
        if share <= 0.0 or degree <= 0 or catalog <= 1:
            return 0.0
        ratio = self.sure * share * catalog / degree + 1.0 - self.sure
        return max(0.0, math.log(ratio))

    def prior(self, rank: int) -> float:
        """Retrieval's log-prior for a tool at 0-based ``rank``."""
        return -self.decay * math.log1p(rank)

    def to_json(self) -> dict[str, object]:
        data: dict[str, object] = {
            "coverage": {kind.value: share for kind, share in self.coverage.items()},
            "decay": self.decay,
        }
        if self.declared is not None:
            data["declared"] = self.declared
        if self.sure != 1.0:
            data["sure"] = self.sure
        if self.order:
            data["order"] = self.order
        return data


class LiveEvidence(Protocol):
    """The edge evidence one tenant's traffic has updated (:mod:`proxy.learning`): the
    offline evidence of an edge is its prior, what the tenant's runs showed moves it.
    Tools are named as plans name them (catalog names)."""

    def nats(self, source: str, target: str, offline: float, catalog: int, sure: float) -> float:
        """The evidence for ``target`` after ``source``, ``offline`` nats before any
        traffic (0 for a pair the graph does not join), in a catalog of ``catalog``
        tools, where a share ``sure`` of the picks an edge leaves from are right (as
        :meth:`EdgeTrust.evidence`); exactly ``offline`` when the tenant never ran
        ``source`` before a tool."""
        ...

    def successors(self, source: str) -> Collection[str]:
        """The tools observed after ``source`` in the tenant's runs."""
        ...


def load_trust(path: Path = DEFAULT_PATH) -> EdgeTrust:
    """The fitted trust; a missing or malformed file is a ValueError naming it."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        coverage = {EdgeKind(k): float(v) for k, v in data["coverage"].items()}
        decay = float(data["decay"])
        declared = None if data.get("declared") is None else float(data["declared"])
        sure = float(data.get("sure", 1.0))
        order = float(data.get("order", 0.0))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"cannot read the edge trust file {path}: {exc}") from exc
    shares = [*coverage.values(), *([] if declared is None else [declared]), sure]
    if decay <= 0 or order < 0 or any(not 0.0 <= share <= 1.0 for share in shares):
        raise ValueError(f"{path}: decay must be > 0, order >= 0 and every coverage within [0, 1]")
    return EdgeTrust(coverage, decay, declared, sure, order)
