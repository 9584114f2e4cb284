"""Orchestrate mode behind the shape every mode has (:class:`~proxy.modes.ChatMode`).

What the router used to do for orchestrate mode alone lives here: start the turn,
claim its ``Idempotency-Key`` (or replay the answer stored under it), then run it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from proxy.errors import ToolgraphError
from proxy.modes import Answer, ChatCall, Events
from proxy.orchestrate.idempotency import REPLAYED, Claim, Stored
from proxy.orchestrate.service import Orchestrator
from proxy.orchestrate.turn import Turn
from proxy.upstream import Reply


class OrchestrateMode:
    def __init__(self, orchestrator: Orchestrator) -> None:
        self._orchestrator = orchestrator

    async def complete(self, call: ChatCall) -> Reply:
        turn = self._orchestrator.start(call.request, call.body, call.context)
        claim = await self._claim(turn, call)
        if isinstance(claim, Stored):
            return _replay_reply(claim)
        return await self._orchestrator.complete(turn, claim)

    async def stream(self, call: ChatCall) -> Answer:
        turn = self._orchestrator.start(call.request, call.body, call.context)
        claim = await self._claim(turn, call)
        if isinstance(claim, Stored):
            return replay(claim)
        return Events(self._orchestrator.stream(turn, claim), turn.headers)

    async def _claim(self, turn: Turn, call: ChatCall) -> Claim | Stored | None:
        """The request's key claimed, or its stored answer; ``None`` without a key.

        A claim cut short (the client went away) would hold its key as "running" for
        the key's whole TTL: it runs to its end, and a key it took is given back.
        """
        if call.idempotency_key is None:
            return None
        turn.keyed = True
        claiming = asyncio.ensure_future(
            self._orchestrator.claim(turn, call.idempotency_key, call.raw)
        )
        try:
            return await asyncio.shield(claiming)
        except asyncio.CancelledError:
            self._orchestrator.records.spawn(self._give_back(claiming, turn))
            raise

    async def _give_back(self, claiming: asyncio.Future[Claim | Stored], turn: Turn) -> None:
        try:
            claim = await claiming
        except ToolgraphError:  # nothing was claimed
            return
        if isinstance(claim, Claim):
            await self._orchestrator.records.settle(claim, turn, None)


def replay(stored: Stored) -> Answer:
    """A stored answer, as the first client got it, marked as replayed."""
    if stored.events is None:
        return _replay_reply(stored)
    return Events(_events(stored.events), {**stored.headers, REPLAYED: "true"})


def _replay_reply(stored: Stored) -> Reply:
    return Reply(stored.body, {**stored.headers, REPLAYED: "true"}, stored.status)


async def _events(events: list[bytes]) -> AsyncIterator[bytes]:
    for event in events:
        yield event
