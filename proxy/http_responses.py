"""Response classes and the one renderer of error responses."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from starlette.responses import Response

from proxy import json_codec
from proxy.errors import ToolgraphError
from proxy.modes import Answer, Events
from proxy.streaming import EventStreamResponse


class JSONResponse(Response):
    """JSON encoded by the proxy's codec (FastAPI's own ORJSONResponse is deprecated)."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return json_codec.dumps(content)


def respond(answer: Answer) -> Response:
    """JSON for a whole answer, server-sent events for a stream."""
    if isinstance(answer, Events):
        return EventStreamResponse(answer.events, answer.headers)
    return Response(
        answer.content,
        status_code=answer.status,
        media_type="application/json",
        headers=answer.headers,
    )


def error_response(error: ToolgraphError, secrets: Iterable[str] = ()) -> Response:
    return Response(
        error.to_json(secrets),
        status_code=error.status,
        media_type="application/json",
        headers=error.headers,
    )
