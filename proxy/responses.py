"""Response classes and the one renderer of error responses."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson
from starlette.responses import Response

from proxy.errors import ToolgraphError


class JSONResponse(Response):
    """JSON encoded with orjson (FastAPI's own ORJSONResponse is deprecated)."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)


def error_response(error: ToolgraphError, secrets: Iterable[str] = ()) -> Response:
    return Response(
        error.to_json(secrets),
        status_code=error.status,
        media_type="application/json",
        headers=error.headers,
    )
