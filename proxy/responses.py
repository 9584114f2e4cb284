"""Response classes and the one renderer of error responses."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from starlette.responses import Response

from proxy import json_codec
from proxy.errors import ToolgraphError


class JSONResponse(Response):
    """JSON encoded by the proxy's codec (FastAPI's own ORJSONResponse is deprecated)."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return json_codec.dumps(content)


def error_response(error: ToolgraphError, secrets: Iterable[str] = ()) -> Response:
    return Response(
        error.to_json(secrets),
        status_code=error.status,
        media_type="application/json",
        headers=error.headers,
    )
