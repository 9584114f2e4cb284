"""Tenants: who a request is, for everything it leaves behind.

A tenant is a key. Every record a request leaves (traces, stored responses,
idempotency outcomes, conversation results, plan memory, fairness slots) is kept
under its tenant and read only under it: another tenant's id reads as unknown,
never as forbidden, so ids cannot be probed. A tenant is named by a hash of the key
(:func:`tenant_of`), so no store holds a key itself.
"""

from __future__ import annotations

import hashlib


def tenant_of(key: str | None) -> str:
    """The tenant of a client key (``None``: the one of clients that send none)."""
    return hashlib.sha256((key or "").encode()).hexdigest()[:32]


#: The tenant of every client that sends no key to an open proxy.
ANONYMOUS = tenant_of(None)
