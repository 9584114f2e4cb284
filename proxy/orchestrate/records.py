"""Where an orchestrated turn's records live, and keeping them without failing the turn.

Traces, conversation results and ``Idempotency-Key``s each get a store of their
own (``proxy/kv.py``) with its own bound, in Redis (shared by every process) as in
process, so a thousand unrelated requests push out old traces but never a key whose
answer a retry may still ask for (that store refuses new keys instead). Traces, turn
results and keys are bounded by bytes per tenant as well: one client's traffic pushes out its own
old traces and fills its own share of keys, never another client's.

Records written after the answer (trace, results, a key's outcome) are a help to
later requests, never part of this one: when the store is down they are dropped,
and :class:`LostRecords` says so in one warning per interval, not a traceback per
request. :class:`TurnRecords` is what a turn reads and writes there, and runs the
writes a cancelled request still owes to their end.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Coroutine
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis

from proxy.config import OrchestrateSettings, Settings
from proxy.errors import StoreFull, StoreUnavailable
from proxy.execute.service import ExecutedPlan
from proxy.kv import Bound, KeyValue, open_key_value
from proxy.learning.service import Learner
from proxy.orchestrate.conversation import ConversationResults, EarlierCall, succeeded_calls
from proxy.orchestrate.idempotency import Claim, IdempotencyKeys, Stored
from proxy.orchestrate.traces import TraceStore, turn_trace
from proxy.orchestrate.turn import Turn, dicts

log = logging.getLogger(__name__)

#: Seconds between two warnings about records lost to a store that is down.
WARN_EVERY = 60.0

#: The largest trace kept (its tool outputs as returned); a larger one is lost, with a warning.
TRACE_BYTES = 4 * 1024 * 1024
#: The largest set of one turn's tool results kept for follow-ups.
RESULT_BYTES = 4 * 1024 * 1024
#: The largest answer kept under an ``Idempotency-Key`` for its retries.
ANSWER_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Stores:
    traces: KeyValue
    results: KeyValue
    keys: KeyValue

    @classmethod
    def open(cls, redis: Redis | None, options: OrchestrateSettings) -> Stores:
        keys = Bound(
            "idempotency_keys",
            options.max_idempotency_keys,
            ANSWER_BYTES,
            evict=False,
            max_bytes=options.max_idempotency_bytes,
            tenant_bytes=options.tenant_idempotency_bytes,
        )
        traces = Bound(
            "traces",
            2 * options.max_traces,  # each with its summary
            TRACE_BYTES,
            max_bytes=options.max_trace_bytes,
            tenant_bytes=options.tenant_trace_bytes,
        )
        results = Bound(
            "turn_results",
            options.max_conversations,
            RESULT_BYTES,
            max_bytes=options.max_conversation_bytes,
            tenant_bytes=options.tenant_conversation_bytes,
        )
        return cls(
            traces=open_key_value(redis, traces),
            results=open_key_value(redis, results),
            keys=open_key_value(redis, keys),
        )


class LostRecords:
    """Counts records a failing store lost; logs one warning per ``every`` seconds."""

    def __init__(self, every: float = WARN_EVERY) -> None:
        self._every = every
        self._last: float | None = None
        self.lost = 0  # since the last warning

    async def keep(self, what: str, work: Awaitable[None]) -> None:
        """Await ``work``; a store that is down or full loses ``what``, with a warning."""
        try:
            await work
        except (StoreUnavailable, StoreFull) as exc:
            self.lose(what, exc)

    def lose(self, what: str, error: StoreUnavailable | StoreFull) -> None:
        self.lost += 1
        now = time.monotonic()
        if self._last is not None and now - self._last < self._every:
            return
        log.warning(
            "%s not kept (%s); %d record(s) lost since the last warning, the next in %.0f s",
            what,
            error.message,
            self.lost,
            self._every,
        )
        self._last, self.lost = now, 0


class TurnRecords:
    """What a turn reads (earlier results, a claimed key) and leaves behind (its
    results, its trace, its key's outcome)."""

    def __init__(self, settings: Settings, stores: Stores, learner: Learner | None = None) -> None:
        """``learner``: what each saved trace's run teaches its tenant (None: nothing)."""
        options = settings.orchestrate
        self._learner = learner
        self._secrets = tuple(settings.secrets())
        self.traces = TraceStore(stores.traces, options.trace_ttl, self._secrets)
        self.keys = IdempotencyKeys(stores.keys, options.idempotency_ttl)
        self.results = ConversationResults(
            stores.results, options.conversation_ttl, options.max_reused_results
        )
        self._lost = LostRecords()
        self._pending: set[asyncio.Task[None]] = set()

    async def earlier(self, turn: Turn) -> list[EarlierCall]:
        """The earlier turn's results; none when their store is down (tools run again)."""
        try:
            return await self.results.earlier(dicts(turn.messages), turn.client)
        except StoreUnavailable as exc:
            self._lost.lose("an earlier turn's tool results (not read)", exc)
            return []

    async def keep_results(
        self, turn: Turn, earlier: list[EarlierCall], executed: ExecutedPlan | None, answer: str
    ) -> None:
        """Keep this turn's results (the earlier ones first) for follow-ups."""
        calls = [*earlier, *(succeeded_calls(executed) if executed else ())]
        remember = self.results.remember(dicts(turn.messages), answer, turn.client, calls)
        await self._lost.keep("a turn's tool results", remember)

    async def save_trace(self, turn: Turn) -> None:
        turn.trace_saved = True
        turn.timings["total"] = round(turn.context.elapsed(), 6)
        # The request's time less its waits on the upstream; for a stream the overhead
        # header went out before planning, so only the trace has the whole of it.
        turn.timings["own"] = round(turn.context.overhead(), 6)
        try:
            await self.traces.put(turn.client, turn.trace_id, turn_trace(turn, self._secrets))
        except (StoreUnavailable, StoreFull) as exc:  # down, or a trace over its bound
            self._lost.lose("a trace", exc)
        except Exception:  # a bug; still, a lost trace must not fail the request
            log.exception("could not store trace %s", turn.trace_id)
        self._learn(turn)

    def _learn(self, turn: Turn) -> None:
        """What the turn's run teaches its tenant, written in the background."""
        executed, plan, learner = turn.executed, turn.plan, self._learner
        if learner is None or not learner.enabled_for(turn.client):
            return
        if executed is not None and plan is not None:
            self.spawn(learner.observe_run(turn.client, plan, executed.run))

    def save_trace_later(self, turn: Turn) -> None:
        """The trace of a request cancelled before it was saved, in the background."""
        if not turn.trace_saved:
            self.spawn(self.save_trace(turn))

    async def settled(self, claim: Claim | None, turn: Turn, outcome: Stored | None) -> None:
        """:meth:`settle` before the client gets the answer (a replay sent at once finds
        it), and to its end even if the client goes away meanwhile."""
        await asyncio.shield(self.spawn(self.settle(claim, turn, outcome)))

    async def settle(self, claim: Claim | None, turn: Turn, outcome: Stored | None) -> None:
        """What the request's Idempotency-Key keeps: ``outcome``; without one, nothing
        if no tool started (a retry may run), else the abandoned request's error."""
        if claim is None:
            return
        if outcome is not None:
            work = self.keys.finish(claim, outcome)
        elif turn.tools_ran:
            work = self.keys.abandon(claim, turn.headers)
        else:
            work = self.keys.release(claim)
        await self._lost.keep("an Idempotency-Key's outcome", work)

    def spawn(self, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """Run bookkeeping to its end even when the request was cancelled."""
        task = asyncio.get_running_loop().create_task(work)
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)
        return task

    async def drain(self) -> None:
        """Wait for the bookkeeping still running (at shutdown)."""
        if self._pending:
            await asyncio.gather(*self._pending, return_exceptions=True)
