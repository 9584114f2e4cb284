"""The end of a turn, written once, for the streamed and the whole answer alike.

:class:`TurnEnd` is an async scope around everything a turn does after its key was
claimed. Inside it the turn may :meth:`~TurnEnd.settle` its ``Idempotency-Key`` before
the client sees the answer (a retry sent at once finds it) and
:meth:`~TurnEnd.save_trace` (a trace lookup sent at once finds it). Leaving it, whatever
happened (an answer, an error, the client gone), it settles what was not settled yet
(the outcome held for it, else nothing kept: the key given back, or the abandoned
request's error once tools ran) and saves a trace not saved yet, both in the
background, as a cancelled request still owes them.
"""

from __future__ import annotations

import asyncio
from types import TracebackType

from proxy.errors import ToolgraphError
from proxy.orchestrate.idempotency import Claim, IdempotencyKeys, Stored
from proxy.orchestrate.records import TurnRecords
from proxy.orchestrate.turn import Turn


class TurnEnd:
    def __init__(self, records: TurnRecords, turn: Turn, claim: Claim | None) -> None:
        self._records = records
        self._turn = turn
        self._claim = claim
        self._settled = False
        #: what the key keeps when the scope is left without :meth:`settle`
        self.outcome: Stored | None = None

    async def __aenter__(self) -> TurnEnd:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if not self._settled:
            self._settled = True
            self._records.spawn(self._records.settle(self._claim, self._turn, self.outcome))
        self._records.save_trace_later(self._turn)

    async def settle(self, outcome: Stored | None) -> None:
        """Keep ``outcome`` under the key now, to its end even if the client goes away."""
        self._settled = True
        await self._records.settled(self._claim, self._turn, outcome)

    async def save_trace(self) -> None:
        await self._records.save_trace(self._turn)


async def claim_key(
    keys: IdempotencyKeys, records: TurnRecords, turn: Turn, key: str, raw: bytes
) -> Claim | Stored:
    """``key`` claimed for ``turn``, or the answer stored under it.

    A claim cut short (the client went away) would hold its key as "running" for the
    key's whole TTL: it runs to its end, and a key it took is given back.
    """
    turn.keyed = True
    claiming = asyncio.ensure_future(keys.claim(key, turn.client, raw))
    try:
        return await asyncio.shield(claiming)
    except asyncio.CancelledError:
        records.spawn(_give_back(records, claiming, turn))
        raise


async def _give_back(
    records: TurnRecords, claiming: asyncio.Future[Claim | Stored], turn: Turn
) -> None:
    try:
        claim = await claiming
    except ToolgraphError:  # nothing was claimed
        return
    if isinstance(claim, Claim):
        await records.settle(claim, turn, None)
