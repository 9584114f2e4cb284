"""Bearer-token authentication for the /v1 API."""

from __future__ import annotations

from starlette.requests import Request

from proxy.context import RequestContext
from proxy.services import services_of


async def authenticate(request: Request) -> None:
    """Check the client's key (:class:`~proxy.tenancy.callers.Authenticator`), count it
    against its limits, and note on the request's context who it is."""
    authorization = request.headers.get("authorization", "")
    peer = request.client.host if request.client else ""
    caller, release = await services_of(request).authenticator.admit(authorization, peer)
    context: RequestContext = request.state.context
    context.admitted(caller, release)
