"""Bearer-token authentication for the /v1 API."""

from __future__ import annotations

import hmac

from starlette.requests import Request

from proxy.errors import AuthenticationFailed
from proxy.services import services_of


async def authenticate(request: Request) -> None:
    """Check the client's key against the master key, when one is set.

    Without a master key toolgraph is open, and the client's own bearer token is
    kept so it can be forwarded to an upstream that has no key configured.
    """
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    token = token.strip() if scheme.lower() == "bearer" else ""
    master_key = services_of(request).master_key
    if master_key is None:
        request.state.context.client_key = token or None
        return
    if not token:
        raise AuthenticationFailed(
            "You didn't provide an API key. Send it as 'Authorization: Bearer YOUR_KEY'."
        )
    if not hmac.compare_digest(token.encode(), master_key):
        raise AuthenticationFailed("Incorrect API key provided.")
