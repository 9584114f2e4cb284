"""Scenario D of the load benchmark: two tenants (virtual keys) of one proxy, one of
them hostile.

The benign tenant sends a few orchestrate requests at a time, one in eight with an
``Idempotency-Key``: first alone, then beside the hostile tenant, which sends many at
a time: every other one a CPU-heavy sandboxed expression (``HARD``), the rest with a
fresh ``Idempotency-Key``, answered without a tool, fast, each answer ``LONG_ANSWER``
bytes long, so that its keys fill the tenant's own share of the key store within
seconds (its new keys are then refused with 429, at once, and it sends again as fast
as it is answered) while its heavy calls go on.

What it measures: the benign tenant's latency alone and beside the hostile load, its
errors (none is the target: the hostile tenant fills its own share of every store and
its own per-client slots, not the benign one's), and what the hostile tenant got.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
import orjson

from eval._bench_client import Endpoint
from eval._load_client import Load, Outcome
from eval._load_report import summarize
from testing.brain import Brain, plan_of
from testing.fake_upstream import Script

ADMIN_KEY = "tg-load-admin-key-0123456789"
BENIGN = "Please compute 2*pi*{index}"
HOSTILE = "Please compute the hard sum {index}"
#: One in this many of the benign tenant's requests carries an Idempotency-Key.
BENIGN_KEYED_EVERY = 8
#: Half a second of one core in the sandbox per call, idle (0.49 s measured).
HARD = "factorial(300000) % 1000003"
#: One tenant's share of the key store in this scenario: some 200 of the benign tenant's
#: keys with their answers (a run keys fewer), a dozen of the hostile tenant's.
TENANT_IDEMPOTENCY_BYTES = 256 * 1024
#: The length of the hostile tenant's answers without a tool.
LONG_ANSWER = 20_000
_INDEX = re.compile(r"Please compute (?:2\*pi\*|the hard sum )(\d+)")


@dataclass
class TenantsBrain(Brain):
    """Plans both tenants' requests as one ``evaluate_expression`` step each."""

    def decomposition(self, conversation: str) -> dict[str, Any] | None:
        found = _INDEX.search(conversation)
        if found is None:
            return None
        if found.group(0).startswith("Please compute the hard sum") and _odd(found):
            return {"no_tools": True}  # the hostile tenant's fast requests
        return plan_of((found.group(0), []))

    def answer(self, request: dict[str, Any], system: str) -> Script:
        users = [m for m in request.get("messages") or [] if m.get("role") == "user"]
        text = str(users[-1].get("content") or "") if users else ""
        if "the hard sum" in text:
            return Script(text="long " * (LONG_ANSWER // 5))
        return super().answer(request, system)

    def arguments_for(self, task: str) -> Any:
        found = _INDEX.search(task)
        if found is None:
            return super().arguments_for(task)
        if task.startswith("Please compute the hard sum"):
            return {"expression": HARD}
        return {"expression": f"2*pi*{found.group(1)}"}


def _odd(found: re.Match[str]) -> bool:
    return int(found.group(1)) % 2 == 1


def brain() -> TenantsBrain:
    return TenantsBrain(tools={"Please compute": "evaluate_expression"}, remember=False)


def body_for(text: str, model: str) -> Callable[[int], bytes]:
    def body(index: int) -> bytes:
        return orjson.dumps(
            {
                "model": model,
                "messages": [{"role": "user", "content": text.format(index=index)}],
                "toolgraph": {"mode": "orchestrate"},
            }
        )

    return body


def create_key(port: int, name: str) -> str:
    """A virtual key of the proxy at ``port`` (its secret)."""
    response = httpx.post(
        f"http://127.0.0.1:{port}/v1/toolgraph/keys",
        json={"name": name},
        headers={"authorization": f"Bearer {ADMIN_KEY}"},
        timeout=60,
    )
    response.raise_for_status()
    secret: str = response.json()["key"]
    return secret


def benign_keyed(index: int) -> bool:
    return index % BENIGN_KEYED_EVERY == 0


def hostile_keyed(index: int) -> bool:
    return index % 2 == 1  # the fast ones; the heavy ones go on once the keys are refused


def tenant_load(
    port: int,
    key: str,
    text: str,
    model: str,
    sizes: tuple[int, float],
    tag: str,
    keyed: Callable[[int], bool],
) -> Load:
    """A load of ``key``'s (``sizes``: concurrency, timeout), the requests ``keyed``
    picks each with an ``Idempotency-Key`` of its own."""
    concurrency, timeout = sizes

    def key_of(index: int) -> dict[str, str]:
        return {"idempotency-key": f"{tag}-{index}"} if keyed(index) else {}

    return Load(
        endpoint=Endpoint("127.0.0.1", port),
        body_for=body_for(text, model),
        headers={"authorization": f"Bearer {key}"},
        concurrency=concurrency,
        stream=False,
        timeout=timeout,
        headers_for=key_of,
    )


def tenants_summary(benign: Load, alone: int, hostile: Load) -> dict[str, Any]:
    """The benign tenant beside the hostile one (the row), alone, and the hostile one."""
    first = benign.outcomes[:alone]
    beside = benign.outcomes[alone:]
    summary = summarize(beside, _span(beside))
    summary["alone"] = _brief(summarize(first, _span(first)))
    hostile_summary = summarize(hostile.outcomes, hostile.elapsed)
    summary["hostile"] = _brief(hostile_summary)
    summary["hostile"]["first_error_by_status"] = hostile_summary["first_error_by_status"]
    return summary


def _span(outcomes: list[Outcome]) -> float:
    if not outcomes:
        return 0.0
    return max(o.ended for o in outcomes) - min(o.started for o in outcomes)


def _brief(summary: dict[str, Any]) -> dict[str, Any]:
    keep = ("requests", "answered", "errors_by_status", "p50_ms", "p99_ms", "answered_per_second")
    return {name: summary[name] for name in keep}
