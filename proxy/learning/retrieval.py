"""Each tenant's served queries, rebuilt beside the requests and swapped in when they help.

A request reads its tenant's live :class:`~proxy.learning.traffic.ServedQueries` with
:meth:`TrafficRetrieval.current` (a dict read: nothing is computed on its path) and,
when the tenant wrote since the last rebuild or ``learning.refresh`` seconds passed,
starts :meth:`TrafficRetrieval.refresh` in the background, at most one per tenant at a
time. A rebuild reads the tenant's ``served`` counts, embeds the queries it has not
embedded before (on a worker thread), and builds a new state from every query but a
fixed held-out slice (:func:`~proxy.learning.traffic.held_out`). That slice is then
searched with the new state and with the live one (or none): the new state goes live
only when its NDCG@5 on the slice is not lower; otherwise the live one stays (the
rebuild is *rolled back*, counted and logged). Until its first rebuild a tenant
searches exactly as without learning.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from proxy import metrics
from proxy.learning.service import Learner
from proxy.learning.traffic import Served, ServedQueries, build_state, held_out, served_of
from proxy.plan.candidates import CandidateFinder
from retriever.encoder import Encoder
from retriever.metrics import ndcg_at

log = logging.getLogger(__name__)

#: Tenants whose state one catalog keeps in process (the least recently read go, and
#: are rebuilt in the background when read again).
STATES_KEPT = 32
#: Served queries a state holds at most (the most observed first): 2,048 x 384 float32
#: rows are 3 MB.
MAX_ROWS = 2048
#: Held-out queries a check searches at most (twice each: the new state and the live).
MAX_CHECKED = 200
#: The depth of the check's metric (NDCG@5).
CHECK_DEPTH = 5
#: Texts embedded per forward pass while rebuilding.
BATCH = 64
#: Seconds between two rebuilds of one tenant after its own writes (a busy tenant
#: writes on every request; a rebuild searches its held-out slice twice).
REBUILD_GAP = 5.0

Outcome = Literal["swapped", "rolled_back", "unchanged", "unread"]


@dataclass(frozen=True)
class Check:
    """A rebuild's verdict: the held-out slice's NDCG@5 with the new state and the live."""

    outcome: Outcome
    new: float = 0.0
    live: float = 0.0
    held_out: int = 0


@dataclass
class _Live:
    state: ServedQueries | None
    writes: int
    built: float


class TrafficRetrieval:
    """One catalog's per-tenant served queries: read by requests, rebuilt beside them.

    ``finder``: the catalog's (the check searches with it, as requests do); ``encoder``:
    the one its queries are embedded with; ``clock``: seconds (tests pass their own).
    """

    def __init__(
        self,
        finder: CandidateFinder,
        encoder: Encoder,
        learner: Learner,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.finder = finder
        self.encoder = encoder
        self.learner = learner
        self._clock = clock
        self._live: OrderedDict[str, _Live] = OrderedDict()
        self._running: dict[str, asyncio.Task[Check]] = {}

    @property
    def enabled(self) -> bool:
        options = self.learner.options
        return options.enabled and options.retrieval

    def current(self, tenant: str) -> ServedQueries | None:
        """``tenant``'s live state (None: search as without learning); starts a rebuild
        in the background when it may be out of date."""
        if not self.enabled or not self.learner.enabled_for(tenant):
            return None
        held = self._live.get(tenant)
        if held is not None:
            self._live.move_to_end(tenant)
        if self._stale(tenant, held):
            self.refresh_later(tenant)
        return None if held is None else held.state

    def live(self, tenant: str) -> ServedQueries | None:
        """``tenant``'s live state as it is, starting nothing."""
        held = self._live.get(tenant)
        return None if held is None else held.state

    def refresh_later(self, tenant: str) -> None:
        """Start :meth:`refresh` for ``tenant`` unless one is running."""
        if tenant in self._running:
            return
        task = asyncio.get_running_loop().create_task(self.refresh(tenant))
        self._running[tenant] = task
        task.add_done_callback(lambda done: self._finished(tenant, done))

    async def refresh(self, tenant: str) -> Check:
        """Rebuild ``tenant``'s state from its counts; swap it in unless the held-out
        check gets worse (then the live state stays)."""
        writes = self.learner.writes(tenant)
        counts = await self.learner.counts_of(tenant)
        if counts is None:
            return Check("unread")
        held = self._live.get(tenant)
        live = None if held is None else held.state
        new, check = await asyncio.to_thread(self._rebuilt, served_of(counts), live)
        metrics.LEARNING_REBUILDS.labels(check.outcome).inc()
        if check.outcome == "rolled_back":
            log.warning(
                "learned retrieval rolled back for a tenant: held-out NDCG@5 %.3f < %.3f (%d)",
                check.new,
                check.live,
                check.held_out,
            )
        kept = new if check.outcome == "swapped" else live
        self._live[tenant] = _Live(kept, writes, self._clock())
        self._live.move_to_end(tenant)
        while len(self._live) > STATES_KEPT:
            self._live.popitem(last=False)
        return check

    def _stale(self, tenant: str, held: _Live | None) -> bool:
        if held is None:
            return True
        since = self._clock() - held.built
        if self.learner.writes(tenant) != held.writes and since >= REBUILD_GAP:
            return True
        return since >= self.learner.options.refresh

    def _finished(self, tenant: str, task: asyncio.Task[Check]) -> None:
        self._running.pop(tenant, None)
        if not task.cancelled() and task.exception() is not None:
            log.error("learned retrieval not rebuilt", exc_info=task.exception())

    def _rebuilt(
        self, served: Sequence[Served], live: ServedQueries | None
    ) -> tuple[ServedQueries, Check]:
        """The new state and its check (on a worker thread)."""
        kept = sorted(served, key=lambda s: -(s.good + s.bad))[:MAX_ROWS]
        train = [s for s in kept if not held_out(s.query)]
        options = self.learner.options
        vectors = self._vectors([s.query for s in train], live)
        new = build_state(train, vectors, options.retrieval_weight, options.retrieval_prior)
        if live is not None and live.rows == new.rows:
            return live, Check("unchanged")
        checked = _checked(served)
        if not checked:
            return new, Check("swapped")
        queries = list(checked)
        rows = self._vectors(queries, live)
        scored_new = self._ndcg(new, queries, rows, checked)
        scored_live = self._ndcg(live, queries, rows, checked)
        outcome: Outcome = "swapped" if scored_new >= scored_live else "rolled_back"
        return new, Check(outcome, scored_new, scored_live, len(queries))

    def _vectors(self, texts: Sequence[str], live: ServedQueries | None) -> np.ndarray:
        """``texts`` embedded, reusing the live state's rows."""
        found: dict[str, np.ndarray] = {}
        for text in texts:
            row = None if live is None else live.vector_of(text)
            if row is not None:
                found[text] = row
        missing = [t for t in dict.fromkeys(texts) if t not in found]
        for start in range(0, len(missing), BATCH):
            batch = missing[start : start + BATCH]
            found.update(zip(batch, self.encoder.encode(batch), strict=True))
        if not texts:
            return np.zeros((0, self.encoder.dim), np.float32)
        return np.stack([np.asarray(found[t], dtype=np.float32) for t in texts])

    def _ndcg(
        self,
        state: ServedQueries | None,
        queries: Sequence[str],
        rows: np.ndarray,
        relevant: dict[str, set[str]],
    ) -> float:
        finder = self.finder.with_traffic(state or _NOTHING)
        total = 0.0
        for query, row in zip(queries, rows, strict=True):
            ranked = [c.tool for c in finder.retrieve(query, row, CHECK_DEPTH)]
            total += ndcg_at(ranked, dict.fromkeys(relevant[query], 1), CHECK_DEPTH)
        return total / max(1, len(queries))


_NOTHING = build_state([], np.zeros((0, 1), np.float32), 0.0, 1.0)


def _checked(served: Sequence[Served]) -> dict[str, set[str]]:
    """The held-out slice: each query with the tools that served it well."""
    found: defaultdict[str, set[str]] = defaultdict(set)
    for s in served:
        if s.good > s.bad and held_out(s.query):
            found[s.query].add(s.tool)
    return dict(sorted(found.items())[:MAX_CHECKED])
