"""toolgraph's Grafana dashboard, as code: the JSON files are generated from this.

    python deploy/grafana/dashboard.py    # writes both copies of toolgraph.json

A metric added to proxy/metrics.py needs a panel here (tests/deploy fails until it
has one); every query is checked against the /metrics of a running proxy.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
OUTPUTS = (
    ROOT / "deploy" / "grafana" / "dashboards" / "toolgraph.json",
    ROOT / "helm" / "toolgraph" / "dashboards" / "toolgraph.json",
)
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
RATE = "$__rate_interval"
CHAT = 'route="/v1/chat/completions", mode=~"$mode"'

Query = tuple[str, str]  # (PromQL, legend)


class Layout:
    """Panels placed left to right in rows of 24 columns, top to bottom."""

    def __init__(self) -> None:
        self.panels: list[dict[str, Any]] = []
        self.y = 0

    def row(self, title: str) -> None:
        self._add({"type": "row", "title": title, "collapsed": False, "panels": []}, 0, 24, 1)
        self.y += 1

    def line(self, height: int, *panels: dict[str, Any]) -> None:
        x = 0
        for panel in panels:
            width = panel.pop("width")
            self._add(panel, x, width, height)
            x += width
        assert x <= 24, "a line of panels is wider than the dashboard"
        self.y += height

    def _add(self, panel: dict[str, Any], x: int, width: int, height: int) -> None:
        panel["id"] = len(self.panels) + 1
        panel["gridPos"] = {"h": height, "w": width, "x": x, "y": self.y}
        self.panels.append(panel)


def timeseries(
    title: str, description: str, queries: list[Query], unit: str, width: int
) -> dict[str, Any]:
    panel = _panel("timeseries", title, description, queries, unit, width)
    panel["fieldConfig"]["defaults"]["custom"] = {
        "drawStyle": "line",
        "lineWidth": 1,
        "fillOpacity": 10,
        "showPoints": "never",
    }
    panel["options"] = {
        "legend": {"displayMode": "table", "placement": "bottom", "calcs": ["mean", "max"]},
        "tooltip": {"mode": "multi", "sort": "desc"},
    }
    return panel


def stat(
    title: str, description: str, queries: list[Query], unit: str, width: int
) -> dict[str, Any]:
    panel = _panel("stat", title, description, queries, unit, width)
    panel["options"] = {
        "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
        "colorMode": "value",
        "graphMode": "area",
        "textMode": "auto",
    }
    return panel


def quantiles(
    metric: str, by: str, selector: str, levels: tuple[float, ...], legend: str
) -> list[Query]:
    """histogram_quantile queries of a histogram, one per level."""
    grouping = f"le, {by}" if by else "le"
    return [
        (
            f"histogram_quantile({level}, sum by ({grouping}) "
            f"(rate({metric}_bucket{{{selector}}}[{RATE}])))",
            f"p{round(level * 100)}{legend}",
        )
        for level in levels
    ]


def _panel(
    kind: str, title: str, description: str, queries: list[Query], unit: str, width: int
) -> dict[str, Any]:
    return {
        "type": kind,
        "title": title,
        "description": description,
        "datasource": DATASOURCE,
        "targets": [
            {
                "datasource": DATASOURCE,
                "expr": expr,
                "legendFormat": legend,
                "refId": chr(65 + i),
                "range": True,
            }
            for i, (expr, legend) in enumerate(queries)
        ],
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": {},
        "width": width,
    }


def traffic(layout: Layout) -> None:
    layout.row("Traffic")
    errors = stat(
        "Chat error ratio",
        "Share of chat requests answered with a 5xx status.",
        [
            (
                f'sum(rate(toolgraph_http_requests_total{{{CHAT}, status=~"5.."}}[{RATE}])) '
                f"/ sum(rate(toolgraph_http_requests_total{{{CHAT}}}[{RATE}]))",
                "errors",
            )
        ],
        "percentunit",
        6,
    )
    errors["fieldConfig"]["defaults"]["thresholds"] = {
        "mode": "absolute",
        "steps": [
            {"color": "green", "value": None},
            {"color": "orange", "value": 0.01},
            {"color": "red", "value": 0.05},
        ],
    }
    layout.line(
        4,
        stat(
            "Chat requests / s",
            "Rate of /v1/chat/completions answered, all statuses.",
            [(f"sum(rate(toolgraph_http_requests_total{{{CHAT}}}[{RATE}]))", "req/s")],
            "reqps",
            6,
        ),
        errors,
        stat(
            "Proxy overhead p99",
            "Time toolgraph itself adds before the response starts, upstream excluded.",
            quantiles("toolgraph_proxy_overhead_seconds", "", 'mode=~"$mode"', (0.99,), ""),
            "s",
            6,
        ),
        stat(
            "In flight",
            "Chat requests being answered now, summed over pods.",
            [('sum(toolgraph_http_requests_in_flight{route="/v1/chat/completions"})', "in flight")],
            "short",
            6,
        ),
    )
    layout.line(
        8,
        timeseries(
            "Requests by route, mode and status",
            "toolgraph_http_requests_total.",
            [
                (
                    "sum by (route, mode, status) "
                    f'(rate(toolgraph_http_requests_total{{mode=~"$mode"}}[{RATE}]))',
                    "{{route}} {{mode}} {{status}}",
                )
            ],
            "reqps",
            16,
        ),
        timeseries(
            "In-flight requests by route",
            "toolgraph_http_requests_in_flight.",
            [("sum by (route) (toolgraph_http_requests_in_flight)", "{{route}}")],
            "short",
            8,
        ),
    )


def latency(layout: Layout) -> None:
    layout.row("Latency")
    layout.line(
        8,
        timeseries(
            "Chat request latency by mode",
            "Request to last byte of the response (whole stream).",
            quantiles(
                "toolgraph_http_request_duration_seconds",
                "mode",
                CHAT,
                (0.5, 0.95, 0.99),
                " {{mode}}",
            ),
            "s",
            12,
        ),
        timeseries(
            "Time to first token by mode and model",
            "Request to the first streamed event sent to the client.",
            quantiles(
                "toolgraph_time_to_first_token_seconds",
                "mode, model",
                'mode=~"$mode", model=~"$model"',
                (0.5, 0.95),
                " {{mode}} {{model}}",
            ),
            "s",
            12,
        ),
    )
    layout.line(
        8,
        timeseries(
            "Proxy overhead by mode",
            "toolgraph_proxy_overhead_seconds: toolgraph's own time before the response started.",
            quantiles(
                "toolgraph_proxy_overhead_seconds",
                "mode",
                'mode=~"$mode"',
                (0.5, 0.99),
                " {{mode}}",
            ),
            "s",
            8,
        ),
        timeseries(
            "Upstream latency by model",
            "toolgraph_upstream_request_duration_seconds (to response headers when streaming).",
            quantiles(
                "toolgraph_upstream_request_duration_seconds",
                "model",
                'model=~"$model"',
                (0.5, 0.95),
                " {{model}}",
            ),
            "s",
            8,
        ),
        timeseries(
            "Upstream calls by model and outcome",
            "Rate of upstream calls, by how they ended.",
            [
                (
                    "sum by (model, outcome) "
                    "(rate(toolgraph_upstream_request_duration_seconds_count"
                    f'{{model=~"$model"}}[{RATE}]))',
                    "{{model}} {{outcome}}",
                )
            ],
            "reqps",
            8,
        ),
    )


def tokens(layout: Layout) -> None:
    layout.row("Tokens")
    layout.line(
        8,
        timeseries(
            "Upstream tokens / s by model and kind",
            "toolgraph_upstream_tokens_total, from the upstream's usage.",
            [
                (
                    "sum by (model, kind) "
                    f'(rate(toolgraph_upstream_tokens_total{{model=~"$model"}}[{RATE}]))',
                    "{{model}} {{kind}}",
                )
            ],
            "short",
            16,
        ),
        stat(
            "Tokens in range by kind",
            "Tokens reported by the upstream over the dashboard's time range.",
            [
                (
                    "sum by (kind) "
                    '(increase(toolgraph_upstream_tokens_total{model=~"$model"}[$__range]))',
                    "{{kind}}",
                )
            ],
            "short",
            8,
        ),
    )


def tools(layout: Layout) -> None:
    calls = "toolgraph_tool_calls_total"
    layout.row("Tools (orchestrate mode)")
    layout.line(
        8,
        timeseries(
            "Tool calls / s by outcome",
            "toolgraph_tool_calls_total: ok, failed, timeout, skipped, cancelled.",
            [(f"sum by (outcome) (rate({calls}[{RATE}]))", "{{outcome}}")],
            "ops",
            8,
        ),
        timeseries(
            "Tool call failure ratio by tool",
            "Share of a tool's calls that failed or timed out (top 10).",
            [
                (
                    f'topk(10, sum by (tool) (rate({calls}{{outcome=~"failed|timeout"}}[{RATE}])) '
                    f"/ sum by (tool) (rate({calls}[{RATE}])))",
                    "{{tool}}",
                )
            ],
            "percentunit",
            8,
        ),
        timeseries(
            "Busiest tools",
            "Calls per second of the ten most called tools.",
            [(f"topk(10, sum by (tool) (rate({calls}[{RATE}])))", "{{tool}}")],
            "ops",
            8,
        ),
    )
    response_bytes = "toolgraph_tool_response_bytes_total"
    layout.line(
        8,
        timeseries(
            "Tool call latency",
            "toolgraph_tool_call_duration_seconds of successful calls, retries included.",
            quantiles(
                "toolgraph_tool_call_duration_seconds",
                "outcome",
                'outcome="ok"',
                (0.5, 0.95, 0.99),
                "",
            ),
            "s",
            8,
        ),
        timeseries(
            "Slowest tools (p95)",
            "p95 latency of the ten slowest tools.",
            [
                (
                    "topk(10, histogram_quantile(0.95, sum by (le, tool) "
                    f"(rate(toolgraph_tool_call_duration_seconds_bucket[{RATE}]))))",
                    "{{tool}}",
                )
            ],
            "s",
            8,
        ),
        timeseries(
            "Tool response bytes and compression",
            f"{response_bytes} before (raw) and after (compressed) compression.",
            [
                (f"sum by (stage) (rate({response_bytes}[{RATE}]))", "{{stage}}"),
                (
                    f'sum(rate({response_bytes}{{stage="compressed"}}[{RATE}])) '
                    f'/ sum(rate({response_bytes}{{stage="raw"}}[{RATE}]))',
                    "compressed / raw",
                ),
            ],
            "Bps",
            8,
        ),
    )


def stages(layout: Layout) -> None:
    stage = "toolgraph_stage_duration_seconds"
    layout.row("Orchestration stages")
    layout.line(
        8,
        timeseries(
            "Stage latency by stage (p50, p95)",
            f"{stage}: orchestrate mode's stages (catalog, plan with its decompose and select, "
            "execute, answer), per request.",
            quantiles(stage, "stage", "", (0.5, 0.95), " {{stage}}"),
            "s",
            24,
        ),
    )


def selection(layout: Layout) -> None:
    selected = "toolgraph_selected_tools_total"
    layout.row("Tool selection")
    layout.line(
        8,
        timeseries(
            "Tools offered vs injected / s",
            f"{selected}: select mode, the clients' tools against the few forwarded upstream; "
            "orchestrate mode, the planner's candidates against the tools it planned.",
            [(f"sum by (mode, kind) (rate({selected}[{RATE}]))", "{{mode}} {{kind}}")],
            "ops",
            12,
        ),
        timeseries(
            "Share of offered tools injected",
            f"Injected over offered, from {selected}.",
            [
                (
                    f'sum by (mode) (rate({selected}{{kind="injected"}}[{RATE}])) '
                    f'/ sum by (mode) (rate({selected}{{kind="offered"}}[{RATE}]))',
                    "{{mode}}",
                )
            ],
            "percentunit",
            12,
        ),
    )


def caches(layout: Layout) -> None:
    lookups = "toolgraph_cache_lookups_total"
    layout.row("Caches")
    layout.line(
        8,
        timeseries(
            "Cache hit ratio by cache",
            f"Hits over lookups, from {lookups}.",
            [
                (
                    f'sum by (cache) (rate({lookups}{{result="hit"}}[{RATE}])) '
                    f"/ sum by (cache) (rate({lookups}[{RATE}]))",
                    "{{cache}}",
                )
            ],
            "percentunit",
            12,
        ),
        timeseries(
            "Cache lookups / s by cache and result",
            f"{lookups}.",
            [(f"sum by (cache, result) (rate({lookups}[{RATE}]))", "{{cache}} {{result}}")],
            "ops",
            12,
        ),
    )


def learning(layout: Layout) -> None:
    rebuilds = "toolgraph_learning_rebuilds_total"
    layout.row("Learning")
    layout.line(
        8,
        timeseries(
            "Learned retrieval rebuilds / s by outcome",
            f"{rebuilds}: a tenant's learned retrieval state rebuilt in the background "
            "(swapped in, rolled back when worse on its held-out queries, unchanged, unread).",
            [(f"sum by (outcome) (rate({rebuilds}[{RATE}]))", "{{outcome}}")],
            "ops",
            12,
        ),
    )


def variable(name: str, label: str, metric: str) -> dict[str, Any]:
    query = f"label_values({metric}, {name})"
    return {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": DATASOURCE,
        "query": {"query": query, "refId": f"{name}-values"},
        "definition": query,
        "includeAll": True,
        "multi": True,
        "allValue": ".*",
        "refresh": 2,
        "sort": 1,
        "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
    }


def build_dashboard() -> dict[str, Any]:
    layout = Layout()
    for section in (traffic, latency, tokens, tools, stages, selection, caches, learning):
        section(layout)
    return {
        "title": "toolgraph",
        "uid": "toolgraph-overview",
        "description": "toolgraph's own metrics (proxy/metrics.py): traffic, latency, time to "
        "first token, overhead, upstream, tokens, tool calls, caches, learning.",
        "tags": ["toolgraph", "llm"],
        "timezone": "browser",
        "editable": False,
        "graphTooltip": 1,
        "schemaVersion": 39,
        "version": 1,
        "refresh": "30s",
        "time": {"from": "now-1h", "to": "now"},
        "templating": {
            "list": [
                {
                    "name": "datasource",
                    "label": "Data source",
                    "type": "datasource",
                    "query": "prometheus",
                    "current": {"text": "Prometheus", "value": "prometheus"},
                    "hide": 0,
                },
                variable("mode", "Mode", "toolgraph_http_requests_total"),
                variable("model", "Model", "toolgraph_upstream_request_duration_seconds_count"),
            ]
        },
        "annotations": {"list": []},
        "panels": layout.panels,
    }


def render() -> str:
    return json.dumps(build_dashboard(), indent=2) + "\n"


if __name__ == "__main__":
    text = render()
    for output in OUTPUTS:
        output.write_text(text, encoding="utf-8")
