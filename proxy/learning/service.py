"""The learner: records what answered requests teach, and gives the planner a
tenant's evidence, without FastAPI and off every request's path.

Writes happen after the answer: the caller spawns :meth:`Learner.observe_run` /
:meth:`Learner.observe_select` as bookkeeping it does not wait for, and a store that is
down loses the counts with one warning per interval, never an error to anyone. A
tenant's evidence is read once per ``learning.refresh`` seconds per process (a write
of its own reads it again at once); a store that is down plans with the offline trust.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence

from pydantic import JsonValue

from proxy.config import LearningSettings
from proxy.errors import StoreUnavailable
from proxy.execute.scheduler import PlanRun
from proxy.learning.evidence import ObservedEdges
from proxy.learning.feedback import Count, Key, feedback_of_run, feedback_of_select
from proxy.learning.store import LearnedStore
from proxy.plan.model import Plan

log = logging.getLogger(__name__)

#: Seconds between two warnings about counts lost to a store that is down.
WARN_EVERY = 60.0


class Learner:
    """``clock``: seconds, for the refresh interval (tests pass their own)."""

    def __init__(
        self,
        store: LearnedStore,
        options: LearningSettings,
        secrets: Sequence[str] = (),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.options = options
        self._secrets = tuple(secrets)
        self._clock = clock
        self._read: OrderedDict[str, tuple[float, ObservedEdges | None]] = OrderedDict()
        self._writes: OrderedDict[str, int] = OrderedDict()
        self._warned: float | None = None

    def enabled_for(self, tenant: str) -> bool:
        """Whether ``tenant``'s requests record and read learned evidence."""
        return self.options.enabled and tenant not in self.options.off_tenants

    async def observe_run(self, tenant: str, plan: Plan, run: PlanRun) -> None:
        """Add what an orchestrated run showed to ``tenant``'s counts."""
        if self.enabled_for(tenant) and not plan.no_tools:
            await self.record(tenant, feedback_of_run(plan, run, self._secrets))

    async def observe_select(
        self, tenant: str, forwarded: Iterable[str], called: Iterable[str]
    ) -> None:
        """Add which of the tools select mode forwarded the model called."""
        if self.enabled_for(tenant):
            await self.record(tenant, feedback_of_select(forwarded, called, self._secrets))

    async def record(self, tenant: str, counts: Mapping[Key, Count]) -> None:
        if not counts:
            return
        try:
            await self.store.add(tenant, counts)
        except StoreUnavailable as exc:
            self._warn(f"learned counts not kept ({exc.message})")
        self._read.pop(tenant, None)
        self._writes[tenant] = self._writes.pop(tenant, 0) + 1
        while len(self._writes) > self.options.max_tenants:
            self._writes.popitem(last=False)

    def writes(self, tenant: str) -> int:
        """How many writes this process made to ``tenant``'s state (a change to read)."""
        return self._writes.get(tenant, 0)

    async def counts_of(self, tenant: str) -> dict[Key, Count] | None:
        """``tenant``'s counts for a background update; None when it does not learn or the
        store cannot be read."""
        if not self.enabled_for(tenant):
            return None
        try:
            return await self.store.counts(tenant)
        except StoreUnavailable as exc:
            self._warn(f"learned counts not read for retrieval ({exc.message})")
            return None

    async def evidence(self, tenant: str) -> ObservedEdges | None:
        """``tenant``'s observed edges for its plans; None when it has none, learning is
        off for it, or the store cannot be read."""
        if not self.enabled_for(tenant):
            return None
        now = self._clock()
        held = self._read.get(tenant)
        if held is not None and now - held[0] < self.options.refresh:
            return held[1]
        try:
            edges = ObservedEdges(await self.store.counts(tenant), self.options.prior_strength)
        except StoreUnavailable as exc:
            self._warn(f"learned counts not read, planning with the offline trust ({exc.message})")
            return None
        found = edges if len(edges) else None
        self._read[tenant] = (now, found)
        self._read.move_to_end(tenant)
        while len(self._read) > self.options.max_tenants:
            self._read.popitem(last=False)
        return found

    async def export(self, tenant: str) -> dict[str, JsonValue]:
        """Everything ``tenant`` learned, as the admin API and CLI show it."""
        return state_json(tenant, await self.store.counts(tenant), self.enabled_for(tenant))

    async def edges_of(self, tenant: str, tool: str) -> list[JsonValue]:
        """The edges ``tenant``'s runs observed into and out of ``tool`` (the console's
        tool page), the most observed first; none when it does not learn or the store
        cannot be read."""
        if not self.enabled_for(tenant):
            return []
        try:
            counts = await self.store.counts(tenant)
        except StoreUnavailable as exc:
            self._warn(f"learned counts not read for a tool page ({exc.message})")
            return []
        found: list[JsonValue] = []
        for (kind, source, target), (good, bad) in _most_seen(counts):
            if kind == "edge" and tool in (source, target):
                way = "out" if source == tool else "in"
                found.append(
                    {
                        "direction": way,
                        "source": source,
                        "target": target,
                        "succeeded": good,
                        "failed": bad,
                    }
                )
        return found

    async def reset(self, tenant: str) -> int:
        """Forget ``tenant``'s learned state; how many counts it held."""
        gone = await self.store.reset(tenant)
        self._read.pop(tenant, None)
        self._writes[tenant] = self._writes.pop(tenant, 0) + 1
        return gone

    def _warn(self, message: str) -> None:
        now = time.monotonic()
        if self._warned is None or now - self._warned >= WARN_EVERY:
            log.warning("%s", message)
            self._warned = now


def state_json(tenant: str, counts: Mapping[Key, Count], enabled: bool) -> dict[str, JsonValue]:
    """One tenant's counts, by kind, the most observed first."""
    edges: list[JsonValue] = []
    picks: list[JsonValue] = []
    select: list[JsonValue] = []
    served: list[JsonValue] = []
    for (kind, a, b), (good, bad) in _most_seen(counts):
        if kind == "edge":
            edges.append({"source": a, "target": b, "succeeded": good, "failed": bad})
        elif kind == "pick":
            picks.append({"chosen": a, "beaten": b, "succeeded": good, "failed": bad})
        elif kind == "served":
            served.append({"tool": a, "query": b, "succeeded": good, "failed": bad})
        else:
            select.append({"tool": a, "called": good, "not_called": bad})
    return {
        "object": "learning.state",
        "tenant": tenant,
        "enabled": enabled,
        "edges": edges,
        "picks": picks,
        "select": select,
        "served": served,
    }


def _most_seen(counts: Mapping[Key, Count]) -> list[tuple[Key, Count]]:
    return sorted(counts.items(), key=lambda item: (-sum(item[1]), item[0]))
