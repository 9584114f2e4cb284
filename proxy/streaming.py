"""The response that carries a stream of server-sent events to the client.

Events arrive already encoded (``data: …`` and a blank line) and go out as they
are. sse-starlette's ``EventSourceResponse`` does the same job with a task group
per response and a cancel scope per send, which measured 0.3-0.4 ms more CPU per
streamed response; this class watches for the client's disconnect with one task
and nothing else. Keep-alive comments are the producer's business: the relay's
upstream sends its own events.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping

from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from proxy.disconnect import cancelled_on_disconnect
from proxy.errors import ClientClosedRequest

SSE_HEADERS = {"cache-control": "no-store", "x-accel-buffering": "no"}


class EventStreamResponse(StreamingResponse):
    def __init__(self, events: AsyncIterator[bytes], headers: Mapping[str, str]) -> None:
        super().__init__(events, headers={**SSE_HEADERS, **headers}, media_type="text/event-stream")
        self._events = events

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        try:
            async with cancelled_on_disconnect(receive):
                async for chunk in self._events:
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
        except ClientClosedRequest:
            return
        finally:
            aclose = getattr(self._events, "aclose", None)
            if aclose is not None:
                await aclose()
        await send({"type": "http.response.body", "body": b"", "more_body": False})
