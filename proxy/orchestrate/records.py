"""Where an orchestrated turn's records live, and keeping them without failing the turn.

Traces, conversation results and ``Idempotency-Key``s each get a store of their
own (``proxy/kv.py``) with its own bound, in Redis (shared by every process) as in
process, so a thousand unrelated requests push out old traces but never a key whose
answer a retry may still ask for (that store refuses new keys instead).

Records written after the answer (trace, results, a key's outcome) are a help to
later requests, never part of this one: when the store is down they are dropped,
and :class:`LostRecords` says so in one warning per interval, not a traceback per
request.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable
from dataclasses import dataclass

from redis.asyncio import Redis

from proxy.config import Orchestrate
from proxy.errors import StoreFull, StoreUnavailable
from proxy.kv import Bound, KeyValue, open_key_value

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
    def open(cls, redis: Redis | None, options: Orchestrate) -> Stores:
        keys = Bound("idempotency_keys", options.max_idempotency_keys, ANSWER_BYTES, evict=False)
        return cls(
            traces=open_key_value(redis, Bound("traces", options.max_traces, TRACE_BYTES)),
            results=open_key_value(
                redis, Bound("turn_results", options.max_conversations, RESULT_BYTES)
            ),
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
