"""A tenant's observed edges as evidence for the planner's re-ranking.

The offline trust (:mod:`proxy.plan.trust`) gives an edge A → B a likelihood ratio that
B comes after A, ``sure · LR₀ + 1 - sure``, where ``LR₀`` compares B with a tool drawn
from the catalog's ``N`` and ``sure`` is the share of the picks an edge leaves from that
are right (an edge out of a wrong pick says nothing). Read as a probability, ``p₀ =
LR₀ / N`` (``1 / N`` for a pair the graph does not join). The tenant's runs are draws of
"which tool ran on A's output": ``s`` of them went to B and succeeded, ``n`` went
anywhere and succeeded, ``f`` went to B and failed. With a Beta prior of strength ``m``
centred on ``p₀`` (``learning.prior_strength``), the posterior mean is

    p = (m · p₀ + s) / (m + n + f)

and the edge's evidence is ``log(sure · p · N + 1 - sure)``, never negative (as
offline: a missing or refuted edge never pushes retrieval's hits down, it only stops
lifting them). ``m`` observations weigh as much as the whole offline fit, so a few
requests move an edge only a little; a tool the tenant never ran anything after keeps
exactly its offline evidence, and so does every pair out of it until it runs.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Collection, Mapping

from proxy.learning.feedback import Count, Key

#: The largest prior probability an offline edge is read as (an edge out of a tool with
#: one neighbour can have ``LR₀ ≥ N``): room for the data to move it either way.
MAX_PRIOR = 0.99


class ObservedEdges:
    """:class:`~proxy.plan.trust.LiveEvidence` from one tenant's ``edge`` counts."""

    def __init__(self, counts: Mapping[Key, Count], strength: float) -> None:
        self.strength = strength
        self._good: dict[tuple[str, str], int] = {}
        self._bad: dict[tuple[str, str], int] = {}
        self._out: dict[str, int] = defaultdict(int)
        self._next: dict[str, list[str]] = defaultdict(list)
        for (kind, source, target), (good, bad) in counts.items():
            if kind != "edge":
                continue
            self._good[(source, target)] = good
            self._bad[(source, target)] = bad
            self._out[source] += good
            if good > 0:
                self._next[source].append(target)

    def __len__(self) -> int:
        return len(self._good)

    def nats(self, source: str, target: str, offline: float, catalog: int, sure: float) -> float:
        out, bad = self._out.get(source, 0), self._bad.get((source, target), 0)
        if (out == 0 and bad == 0) or catalog <= 1 or sure <= 0:
            return offline
        ratio = (math.exp(offline) - (1.0 - sure)) / sure  # LR₀, the discount undone
        prior = min(max(ratio, 1.0) / catalog, MAX_PRIOR)
        good = self._good.get((source, target), 0)
        p = (self.strength * prior + good) / (self.strength + out + bad)
        return max(0.0, math.log(sure * p * catalog + 1.0 - sure))

    def successors(self, source: str) -> Collection[str]:
        return self._next.get(source, ())
