"""Every Prometheus metric toolgraph exports, defined here and nowhere else.

Under several uvicorn workers the CLI points ``PROMETHEUS_MULTIPROC_DIR`` at a
fresh directory before any worker starts; prometheus_client then keeps each
worker's values in files there and ``/metrics`` sums them (see :func:`render`).
"""

from __future__ import annotations

import os

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)

# Seconds; the low end resolves the proxy's own sub-millisecond overhead.
_LATENCY_BUCKETS = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
)  # fmt: skip
_OVERHEAD_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.1, 1.0)

REQUESTS = Counter(
    "toolgraph_http_requests_total",
    "HTTP requests answered, by route, mode and status.",
    ["route", "mode", "status"],
)
REQUEST_LATENCY = Histogram(
    "toolgraph_http_request_duration_seconds",
    "Time from request to the last byte of the response, by route, mode and status.",
    ["route", "mode", "status"],
    buckets=_LATENCY_BUCKETS,
)
IN_FLIGHT = Gauge(
    "toolgraph_http_requests_in_flight",
    "Requests being answered now, by route.",
    ["route"],
    multiprocess_mode="livesum",
)
TIME_TO_FIRST_TOKEN = Histogram(
    "toolgraph_time_to_first_token_seconds",
    "Time from request to the first streamed event sent to the client, by mode and model "
    "(the routing table's name for it; other for a name the table does not list).",
    ["mode", "model"],
    buckets=_LATENCY_BUCKETS,
)
UPSTREAM_LATENCY = Histogram(
    "toolgraph_upstream_request_duration_seconds",
    "Time the upstream took to answer (to its response headers when streaming), by model "
    "(as in time to first token) and outcome (its HTTP status, or error).",
    ["model", "outcome"],
    buckets=_LATENCY_BUCKETS,
)
PROXY_OVERHEAD = Histogram(
    "toolgraph_proxy_overhead_seconds",
    "Time toolgraph itself added before the response started, upstream time excluded.",
    ["mode"],
    buckets=_OVERHEAD_BUCKETS,
)
UPSTREAM_TOKENS = Counter(
    "toolgraph_upstream_tokens_total",
    "Tokens the upstream reported in usage, by model (as in time to first token) and kind "
    "(prompt, completion).",
    ["model", "kind"],
)

TOOL_CALLS = Counter(
    "toolgraph_tool_calls_total",
    "Tool calls the proxy made, by tool and outcome (ok, failed, timeout, skipped, cancelled).",
    ["tool", "outcome"],
)
TOOL_CALL_LATENCY = Histogram(
    "toolgraph_tool_call_duration_seconds",
    "Time one tool call took, retries included, by tool and outcome.",
    ["tool", "outcome"],
    buckets=_LATENCY_BUCKETS,
)
TOOL_RESPONSE_BYTES = Counter(
    "toolgraph_tool_response_bytes_total",
    "Bytes of tool responses before and after compression, by stage (raw, compressed).",
    ["stage"],
)
STAGE_LATENCY = Histogram(
    "toolgraph_stage_duration_seconds",
    "Time one orchestration stage took for one request, by stage (catalog, gate, plan, decompose, "
    "select, execute, answer).",
    ["stage"],
    buckets=_LATENCY_BUCKETS,
)
TOOLS_SELECTED = Counter(
    "toolgraph_selected_tools_total",
    "Tools offered and tools kept, by mode and kind: select mode counts the client's tools "
    "and those forwarded; orchestrate mode the planner's candidates and the tools it planned.",
    ["mode", "kind"],
)
CACHE_LOOKUPS = Counter(
    "toolgraph_cache_lookups_total",
    "Cache lookups by cache and result (hit, miss).",
    ["cache", "result"],
)

LEARNING_REBUILDS = Counter(
    "toolgraph_learning_rebuilds_total",
    "Rebuilds of a tenant's learned retrieval state, by outcome: swapped (in use), "
    "rolled_back (worse on the tenant's held-out queries: the live state stays), "
    "unchanged, unread (the learned store could not be read).",
    ["outcome"],
)


def render() -> tuple[bytes, str]:
    """The exposition text of this process, or of all workers in multiprocess mode."""
    if "PROMETHEUS_MULTIPROC_DIR" in os.environ:
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        return generate_latest(registry), CONTENT_TYPE_LATEST
    return generate_latest(), CONTENT_TYPE_LATEST


def forget_process(pid: int) -> None:
    """Drop a finished worker's live gauges (in-flight) from the shared files."""
    if "PROMETHEUS_MULTIPROC_DIR" in os.environ:
        multiprocess.mark_process_dead(pid)  # type: ignore[no-untyped-call]
