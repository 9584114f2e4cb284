"""Who sent a request: its bearer key checked, the tenant it names, its limits counted.

One :class:`Authenticator` per app, used by every route that takes a client key
(``/v1`` through :func:`proxy.auth.authenticate`, ``/mcp`` by its endpoint), so a
client is the same tenant whichever way it comes in:

* a virtual key (:mod:`proxy.tenancy.keys`) is its own tenant, with its tool scope
  and limits, and is never sent upstream;
* the master key is the operator's tenant, :data:`OPERATOR`;
* without a master key toolgraph is open: any other bearer token names a tenant of
  its own (none: :data:`~proxy.tenancy.ANONYMOUS`) and is forwarded to an upstream
  that has no key configured.

Fairness (the executor's per-client slots) is finer than the tenant where a tenant is
shared: the master key's holders are told apart by their address, and any request
that names its end user (OpenAI's ``user`` field) by that name as well.
"""

from __future__ import annotations

import hmac
import logging
from dataclasses import dataclass

from proxy.errors import AuthenticationFailed
from proxy.tenancy import ANONYMOUS, tenant_of
from proxy.tenancy.keys import SECRET_PREFIX, KeyStore, ToolScope, VirtualKey, digest_of
from proxy.tenancy.limits import Limiter, Release

log = logging.getLogger(__name__)

#: The tenant of the master key's holders (the operator's).
OPERATOR = tenant_of("\0operator")


@dataclass(frozen=True, slots=True)
class Caller:
    """A client the proxy accepted."""

    tenant: str = ANONYMOUS
    forwarded_key: str | None = None  # its own bearer, for an upstream with no key set
    key: VirtualKey | None = None
    fairness: str = ANONYMOUS  # whose per-client slots its tool calls take

    @property
    def scope(self) -> ToolScope | None:
        """The tools it may use; None: every tool."""
        if self.key is None or self.key.scope.unrestricted:
            return None
        return self.key.scope


class Authenticator:
    def __init__(self, master_key: bytes | None, keys: KeyStore, limiter: Limiter) -> None:
        self._master_key = master_key
        self.keys = keys
        self._limiter = limiter

    async def admit(self, authorization: str, peer: str) -> tuple[Caller, Release | None]:
        """The caller ``authorization`` names with its limits counted, and the release the
        request owes them when it ends; or :class:`AuthenticationFailed`, or
        :class:`~proxy.errors.RateLimited`."""
        caller = await self.caller(authorization, peer)
        if caller.key is None:
            return caller, None
        return caller, await self._limiter.admit(caller.key)

    async def caller(self, authorization: str, peer: str = "") -> Caller:
        """The caller an ``Authorization`` header names, or :class:`AuthenticationFailed`."""
        token = bearer_token(authorization)
        if token.startswith(SECRET_PREFIX) and (key := await self.keys.find(digest_of(token))):
            return Caller(key.tenant, None, key, key.tenant)
        if self._master_key is None:
            tenant = tenant_of(token)
            return Caller(tenant, token or None, fairness=tenant)
        if not token:
            raise AuthenticationFailed(
                "You didn't provide an API key. Send it as 'Authorization: Bearer YOUR_KEY'."
            )
        if not hmac.compare_digest(token.encode(), self._master_key):
            raise AuthenticationFailed("Incorrect API key provided.")
        return Caller(OPERATOR, fairness=operator_slot(peer))


def operator_slot(peer: str) -> str:
    """The slot owner of a master-key holder at address ``peer``."""
    return tenant_of(f"{OPERATOR}:{peer}")


def bearer_token(authorization: str) -> str:
    """The token of a ``Bearer`` authorization header; empty for any other."""
    scheme, _, token = authorization.partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


def end_user_slot(fairness: str, user: object) -> str:
    """The slot owner of a request that names its end user (``user``), within its
    caller's; the caller's own when it names none."""
    if not isinstance(user, str) or not user:
        return fairness
    return tenant_of(f"{fairness}:{user}")
