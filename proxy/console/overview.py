"""The console's overview: the process's own Prometheus metrics as one JSON snapshot.

Counters and histograms only grow, so a snapshot says "since start"; the page polls
and subtracts two snapshots for "the last minutes". Percentiles come from histogram
buckets (an upper bound: the bucket's edge), as Prometheus' ``histogram_quantile``
estimates them. Under several workers :func:`proxy.metrics.render` sums them all.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable

from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families
from pydantic import JsonValue

from proxy import metrics

QUANTILES = (0.5, 0.9, 0.99)


def snapshot() -> dict[str, JsonValue]:
    """Requests by status, latency buckets and percentiles, tool calls by outcome,
    stage latency, upstream tokens: the sums since the process started."""
    text, _ = metrics.render()
    families = {f.name: f for f in text_string_to_metric_families(text.decode())}
    latency = _buckets(families.get("toolgraph_http_request_duration_seconds"))
    requests = families.get("toolgraph_http_requests")
    return {
        "requests": _by_label(requests, "status", api_only=True),
        "requests_by_mode": _by_label(requests, "mode", api_only=True),
        "latency_buckets": {_edge(le): n for le, n in latency.items()},
        "latency_quantiles": {str(q): quantile(latency, q) for q in QUANTILES},
        "tool_calls": _by_label(families.get("toolgraph_tool_calls"), "outcome"),
        "tools": _by_label(families.get("toolgraph_tool_calls"), "tool"),
        "stage_seconds": _sums(families.get("toolgraph_stage_duration_seconds"), "stage"),
        "tokens": _by_label(families.get("toolgraph_upstream_tokens"), "kind"),
        "in_flight": sum(v for _, v in _samples(families.get("toolgraph_http_requests_in_flight"))),
    }


def quantile(buckets: dict[float, float], q: float) -> float | None:
    """The smallest bucket edge below which a share ``q`` of observations fall (None:
    nothing observed; the largest finite edge when it lies in the +Inf bucket)."""
    total = buckets.get(math.inf, 0.0)
    if total <= 0:
        return None
    finite = sorted(le for le in buckets if le != math.inf)
    for le in finite:
        if buckets[le] >= q * total:
            return le
    return finite[-1] if finite else None


def _samples(family: Metric | None, suffix: str = "") -> Iterable[tuple[dict[str, str], float]]:
    if family is None:
        return []
    wanted = family.name + suffix
    return [(s.labels, s.value) for s in family.samples if s.name == wanted]


def _by_label(family: Metric | None, label: str, *, api_only: bool = False) -> dict[str, JsonValue]:
    """A counter's (or gauge's) total per value of ``label``; ``api_only``: of the API's
    own routes (the console's page loads, its polling and the probes stay out)."""
    suffix = "_total" if family is not None and family.type == "counter" else ""
    found: dict[str, float] = defaultdict(float)
    for labels, value in _samples(family, suffix):
        if not api_only or _is_api(labels):
            found[labels.get(label, "")] += value
    return {key: total for key, total in found.items()}


def _sums(family: Metric | None, label: str) -> dict[str, JsonValue]:
    """A histogram's count and sum per value of ``label``."""
    found: dict[str, JsonValue] = {}
    counts = _by_suffix(family, "_count", label)
    sums = _by_suffix(family, "_sum", label)
    for key, count in counts.items():
        found[key] = {"count": count, "seconds": round(sums.get(key, 0.0), 6)}
    return found


def _by_suffix(family: Metric | None, suffix: str, label: str) -> dict[str, float]:
    found: dict[str, float] = defaultdict(float)
    for labels, value in _samples(family, suffix):
        found[labels.get(label, "")] += value
    return dict(found)


def _buckets(family: Metric | None) -> dict[float, float]:
    """Cumulative bucket counts summed over the API's routes."""
    found: dict[float, float] = defaultdict(float)
    for labels, value in _samples(family, "_bucket"):
        if _is_api(labels):
            found[float(labels["le"])] += value
    return dict(found)


def _is_api(labels: dict[str, str]) -> bool:
    """A series of a named API route (``other`` holds the console's calls and any URL)."""
    return labels.get("route", "").startswith("/v1/")


def _edge(le: float) -> str:
    return "+Inf" if le == math.inf else repr(le)
