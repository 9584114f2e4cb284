"""Tenancy's fixtures: orchestrate mode's scripted LLM (the gate off) and two clients."""

from __future__ import annotations

from tests.orchestrate.conftest import _no_gate, brain

__all__ = ["_no_gate", "brain"]

#: Two clients' keys: on an open proxy each names a tenant of its own.
KEY_A = "sk-tenant-a-0123456789"
KEY_B = "sk-tenant-b-0123456789"
#: The one upstream key both clients' requests go out with.
UPSTREAM_KEY = "sk-upstream-shared-0123456789"
