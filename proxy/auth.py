"""Bearer-token authentication for the /v1 API."""

from __future__ import annotations

from starlette.requests import Request

from proxy.services import services_of


async def authenticate(request: Request) -> None:
    """Check the client's key (:class:`~proxy.tenancy.callers.Authenticator`) and note
    who it is on the request's context: its tenant, and the key to forward upstream."""
    authorization = request.headers.get("authorization", "")
    caller = await services_of(request).authenticator.caller(authorization)
    context = request.state.context
    context.client_key = caller.forwarded_key
    context.tenant = caller.tenant
