"""Retrieval evidence from traffic: the queries each tool served, as a k-NN vote.

A tenant's ``served`` counts (:mod:`.feedback`) pair each query with the tools that
served it (good) or were shown above a tool that did (a weak negative, bad). Embedded,
they are rows of a small matrix, one per query. A new query's :data:`NEIGHBOURS`
nearest served queries vote for the tools they were served by, each by its kernel
``K(s) = max(0, (s - τ) / (1 - τ))`` of the cosine ``s`` (τ = :data:`THRESHOLD`: a
query farther than that says nothing):

    vote(t) = max(0, Σ_near K · (good_t - n · bad_t)) / (m + Σ_near K · served)

where ``served`` is a neighbour's successes, whatever the tool (a weak negative lowers
its own tool's vote only, it does not dilute the others'), ``m`` the prior
(``learning.retrieval_prior``) and ``n`` the weight of a weak negative
(:data:`NEGATIVE`): one or two requests move a tool little, many similar ones far, and
a tool seen only as beaten is never pushed below today's score. The search adds
``w · vote(t)`` (``learning.retrieval_weight``) to a tool's fused score; a tool with no
served query near the request gets exactly zero, so its score is exactly today's.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from proxy.learning.feedback import Count, Key

#: The cosine under which a served query says nothing about a new one. MiniLM behind
#: the adapter puts paraphrases of one request above it and unrelated requests below.
THRESHOLD = 0.5
#: Rows that vote for a query (the k of k-NN).
NEIGHBOURS = 10
#: Weight of a weak negative (a tool shown above the one that served) against a success.
NEGATIVE = 0.5
#: One query in this many is held out of the state, to check it (by the text's digest:
#: the same queries every time).
HOLD_OUT = 5

_versions = itertools.count(1)


@dataclass(frozen=True)
class Served:
    """One (tool, query) pair of a tenant's traffic and its counts."""

    tool: str
    query: str
    good: int
    bad: int


def served_of(counts: Mapping[Key, Count]) -> list[Served]:
    """The ``served`` counts of a tenant's state, in a fixed order."""
    found = [
        Served(tool, query, good, bad)
        for (kind, tool, query), (good, bad) in counts.items()
        if kind == "served" and query
    ]
    return sorted(found, key=lambda s: (s.query, s.tool))


def held_out(query: str) -> bool:
    """Whether ``query`` belongs to the slice kept out of the state to check it."""
    return hashlib.blake2b(query.encode(), digest_size=4).digest()[0] % HOLD_OUT == 0


class ServedQueries:
    """One tenant's served queries as vectors: immutable, swapped whole when rebuilt.

    ``vectors``: one row per entry of ``served`` (entries of one query share it).
    """

    def __init__(
        self,
        served: Sequence[Served],
        vectors: npt.NDArray[np.float32],
        weight: float,
        prior: float,
    ) -> None:
        if len(served) != len(vectors):
            raise ValueError(f"{len(served)} served queries but {len(vectors)} vectors")
        self.version = next(_versions)
        self.rows = tuple(served)
        self.weight = weight
        self.prior = prior
        self.tools = sorted({s.tool for s in served})
        slot = {tool: i for i, tool in enumerate(self.tools)}
        first: dict[str, int] = {}
        for i, s in enumerate(served):
            first.setdefault(s.query, i)
        self.queries = {query: n for n, query in enumerate(first)}
        self._text = np.asarray([self.queries[s.query] for s in served], dtype=np.intp)
        self._owner = np.asarray([slot[s.tool] for s in served], dtype=np.intp)
        self._good = np.asarray([s.good for s in served], dtype=np.float32)
        self._bad = np.asarray([s.bad for s in served], dtype=np.float32)
        rows = np.asarray(list(first.values()), dtype=np.intp)
        self._matrix = np.ascontiguousarray(vectors[rows] if len(rows) else vectors, np.float32)
        # each query's successes, whatever tool: what one neighbour weighs
        self._served = np.bincount(self._text, self._good, minlength=len(self.queries))

    def __len__(self) -> int:
        return len(self._owner)

    def vector_of(self, query: str) -> npt.NDArray[np.float32] | None:
        """The row of a query already embedded (a rebuild embeds only new ones)."""
        row = self.queries.get(query)
        return None if row is None else self._matrix[row]

    def votes(self, query: npt.NDArray[np.float32]) -> dict[str, float]:
        """Each tool's vote for ``query`` (its rows: the text's and its clauses', each
        served query scored by its best), only tools with a vote above zero."""
        if not len(self._owner):
            return {}
        rows = np.atleast_2d(np.asarray(query, dtype=np.float32))
        cosine = (rows @ self._matrix.T).max(axis=0)
        near = np.argpartition(-cosine, min(NEIGHBOURS, len(cosine)) - 1)[:NEIGHBOURS]
        kernel = np.zeros(len(cosine), dtype=np.float32)
        kernel[near] = np.clip((cosine[near] - THRESHOLD) / (1.0 - THRESHOLD), 0.0, 1.0)
        if not kernel.any():
            return {}
        weights = kernel[self._text]
        mass = float((kernel * self._served).sum())
        share = np.bincount(
            self._owner, weights * (self._good - NEGATIVE * self._bad), minlength=len(self.tools)
        )
        return {
            self.tools[int(slot)]: float(share[slot]) / (self.prior + mass)
            for slot in np.flatnonzero(share > 0)
        }

    def bonuses(self, query: npt.NDArray[np.float32]) -> dict[str, float]:
        """What the search adds to each tool's fused score: ``weight * vote``."""
        return {tool: self.weight * vote for tool, vote in self.votes(query).items()}


def build_state(
    served: Iterable[Served],
    vectors: npt.NDArray[np.float32],
    weight: float,
    prior: float,
) -> ServedQueries:
    rows = list(served)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True) if len(rows) else None
    unit = vectors / np.maximum(norms, 1e-12) if norms is not None else vectors
    return ServedQueries(rows, unit.astype(np.float32), weight, prior)
