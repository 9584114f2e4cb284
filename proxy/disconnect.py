"""Stop work for a client that has gone away.

Starlette cancels a streamed response when its client disconnects, but a request
still waiting for the upstream's first byte has nobody watching; an upstream call
that nobody will read still costs tokens, so it is cancelled here.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from starlette.types import Receive

from proxy.errors import ClientClosedRequest


@asynccontextmanager
async def cancelled_on_disconnect(receive: Receive) -> AsyncIterator[None]:
    """Cancel the body of the ``async with`` if the client disconnects meanwhile.

    Call it only once the request body has been read: from then on the ASGI
    server's ``receive`` has nothing left to say but ``http.disconnect``.
    """
    task = asyncio.current_task()
    assert task is not None
    disconnected = False

    async def watch() -> None:
        nonlocal disconnected
        while (await receive())["type"] != "http.disconnect":
            continue
        disconnected = True
        task.cancel()

    watcher = asyncio.create_task(watch())
    try:
        yield
    except asyncio.CancelledError:
        if not disconnected:
            raise
        task.uncancel()
        raise ClientClosedRequest("the client disconnected before the answer was ready") from None
    finally:
        watcher.cancel()
