"""Who sent a request: its bearer key checked, and the tenant it names.

One :class:`Authenticator` per app, used by every route that takes a client key
(``/v1`` through :func:`proxy.auth.authenticate`, ``/mcp`` by its endpoint), so a
client is the same tenant whichever way it comes in.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass

from proxy.errors import AuthenticationFailed
from proxy.tenancy import ANONYMOUS, tenant_of

#: The tenant of the master key's holders (the operator's).
OPERATOR = tenant_of("\0operator")


@dataclass(frozen=True, slots=True)
class Caller:
    """A client the proxy accepted."""

    tenant: str = ANONYMOUS
    forwarded_key: str | None = None  # its own bearer, for an upstream with no key set


class Authenticator:
    def __init__(self, master_key: bytes | None) -> None:
        self._master_key = master_key

    async def caller(self, authorization: str) -> Caller:
        """The caller an ``Authorization`` header names, or :class:`AuthenticationFailed`.

        Without a master key toolgraph is open: the client's own bearer token is
        kept so it can be forwarded to an upstream that has no key configured, and
        it names the client's tenant, so two clients of an open proxy see only their
        own records.
        """
        token = bearer_token(authorization)
        if self._master_key is None:
            return Caller(tenant_of(token), token or None)
        if not token:
            raise AuthenticationFailed(
                "You didn't provide an API key. Send it as 'Authorization: Bearer YOUR_KEY'."
            )
        if not hmac.compare_digest(token.encode(), self._master_key):
            raise AuthenticationFailed("Incorrect API key provided.")
        return Caller(OPERATOR)


def bearer_token(authorization: str) -> str:
    """The token of a ``Bearer`` authorization header; empty for any other."""
    scheme, _, token = authorization.partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""
