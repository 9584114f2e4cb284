"""An answer kept under an ``Idempotency-Key``, sent again as the first client got it."""

from __future__ import annotations

from collections.abc import AsyncIterator

from proxy.modes import Answer, Events
from proxy.orchestrate.idempotency import REPLAYED, Stored
from proxy.upstream import Reply


def replay(stored: Stored) -> Answer:
    """A stored answer, as the first client got it, marked as replayed."""
    if stored.events is None:
        return replay_reply(stored)
    return Events(_events(stored.events), {**stored.headers, REPLAYED: "true"})


def replay_reply(stored: Stored) -> Reply:
    return Reply(stored.body, {**stored.headers, REPLAYED: "true"}, stored.status)


async def _events(events: list[bytes]) -> AsyncIterator[bytes]:
    for event in events:
        yield event
