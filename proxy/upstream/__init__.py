"""Talking to the LLM upstream: routing a model name, relaying or translating the call."""

from proxy.upstream.base import (
    EventStream,
    Reply,
    Upstream,
    Upstreams,
    relay_events,
    waits_counted,
    within,
)
from proxy.upstream.routing import ModelRouter, Target

__all__ = [
    "EventStream",
    "ModelRouter",
    "Reply",
    "Target",
    "Upstream",
    "Upstreams",
    "relay_events",
    "waits_counted",
    "within",
]
