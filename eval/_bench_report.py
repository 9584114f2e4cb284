"""The overhead benchmark's figures: percentiles, added latency, target checks, output.

Added latency is a proxy's percentile minus the direct path's percentile at the
same concurrency and mode, both measured by the same client against the same
upstream, so the upstream's delay and the client's own cost cancel out.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from matplotlib.figure import Figure
from rich import box
from rich.table import Table

from eval._bench_client import Samples

#: ``baseline`` is toolgraph at another commit (``--baseline REF``), measured in the same run;
#: the last three are ``/v1/responses``: toolgraph translating it into the upstream's chat
#: completions, the upstream's own, and toolgraph relaying it to the upstream's own.
TARGETS = (
    "direct",
    "toolgraph",
    "baseline",
    "litellm",
    "responses translated",
    "direct responses",
    "responses relayed",
)
PROXIES = ("toolgraph", "baseline", "litellm", "responses translated", "responses relayed")
#: toolgraph's own targets: a failed request of any is a miss
TOOLGRAPH = ("toolgraph", "responses translated", "responses relayed")
#: what each proxy is compared with: the same request straight to the upstream, through
#: the API the proxy reaches it by (a translated request reaches its chat completions)
DIRECT_OF = {"responses relayed": "direct responses"}
DIRECTS = ("direct", "direct responses")
Status = Literal["pass", "miss", "not measured"]


@dataclass(frozen=True, slots=True)
class CellKey:
    concurrency: int
    stream: bool
    target: str

    @property
    def mode(self) -> str:
        return "stream" if self.stream else "non-stream"

    def order(self) -> tuple[int, bool, int]:
        """Concurrency, then mode, then direct, toolgraph, its baseline, LiteLLM."""
        rank = TARGETS.index(self.target) if self.target in TARGETS else len(TARGETS)
        return self.concurrency, self.stream, rank


@dataclass(frozen=True, slots=True)
class Summary:
    """One cell's figures, in milliseconds and requests per second."""

    requests: int
    errors: int
    first_error: str | None
    p50_ms: float
    p99_ms: float
    first_byte_p50_ms: float | None
    first_byte_p99_ms: float | None
    requests_per_second: float
    #: the server's own CPU (its process and children) per request answered, warm-up
    #: included: what a proxy costs, far less disturbed by other load than its latency
    server_cpu_ms: float | None = None


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    mode: str
    value: float | None
    limit: float | None
    unit: str
    status: Status


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0 to 100), interpolating linearly between ranks."""
    if not values:
        raise ValueError("percentile of no values")
    if not 0 <= q <= 100:
        raise ValueError(f"percentile {q} is outside 0..100")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def summarize(samples: Samples) -> Summary | None:
    """The cell's figures, or None when not one request succeeded."""
    if not samples.latencies:
        return None
    first = samples.first_byte
    return Summary(
        requests=len(samples.latencies),
        errors=samples.errors,
        first_error=samples.first_error,
        p50_ms=percentile(samples.latencies, 50) * 1000,
        p99_ms=percentile(samples.latencies, 99) * 1000,
        first_byte_p50_ms=percentile(first, 50) * 1000 if first else None,
        first_byte_p99_ms=percentile(first, 99) * 1000 if first else None,
        requests_per_second=len(samples.latencies) / samples.elapsed if samples.elapsed else 0.0,
    )


def added_latency(proxy: Summary | None, direct: Summary | None) -> tuple[float, float] | None:
    """(added p50, added p99) in ms, or None when either side was not measured."""
    if proxy is None or direct is None:
        return None
    return proxy.p50_ms - direct.p50_ms, proxy.p99_ms - direct.p99_ms


def added_for(cells: Mapping[CellKey, Summary | None], key: CellKey) -> tuple[float, float] | None:
    direct = CellKey(key.concurrency, key.stream, DIRECT_OF.get(key.target, "direct"))
    return added_latency(cells.get(key), cells.get(direct))


def check_targets(
    cells: Mapping[CellKey, Summary | None], low: int = 1, high: int = 64
) -> list[Check]:
    """The issue's targets, per mode: absolute at ``low`` concurrency, against LiteLLM at ``high``.

    Requests per second are compared at ``high``, where one worker of each proxy is
    saturated on the CPU, which makes them requests per second per worker.
    """
    checks: list[Check] = []
    for stream in (False, True):
        mode = "stream" if stream else "non-stream"
        low_added = added_for(cells, CellKey(low, stream, "toolgraph"))
        high_added = added_for(cells, CellKey(high, stream, "toolgraph"))
        litellm_added = added_for(cells, CellKey(high, stream, "litellm"))
        checks.append(_at_most(f"added p50 at c={low}", mode, _pick(low_added, 0), 1.0))
        checks.append(_at_most(f"added p99 at c={low}", mode, _pick(low_added, 1), 3.0))
        litellm_p99 = _pick(litellm_added, 1)
        checks.append(
            _at_most(
                f"added p99 at c={high} <= 0.1 x LiteLLM's",
                mode,
                _pick(high_added, 1),
                None if litellm_p99 is None else 0.1 * litellm_p99,
            )
        )
        ours = cells.get(CellKey(high, stream, "toolgraph"))
        theirs = cells.get(CellKey(high, stream, "litellm"))
        checks.append(
            _at_least(
                f"req/s per worker at c={high} >= 4 x LiteLLM's",
                mode,
                ours.requests_per_second if ours else None,
                4 * theirs.requests_per_second if theirs else None,
            )
        )
    failed = sum(s.errors for k, s in cells.items() if k.target in TOOLGRAPH and s is not None)
    missing = any(s is None for k, s in cells.items() if k.target in TOOLGRAPH)
    checks.append(
        Check(
            "no failed toolgraph requests",
            "both",
            failed,
            0,
            "requests",
            _status(None if missing else failed == 0),
        )
    )
    return checks


def _pick(pair: tuple[float, float] | None, index: int) -> float | None:
    return None if pair is None else pair[index]


def _at_most(name: str, mode: str, value: float | None, limit: float | None) -> Check:
    passed = None if value is None or limit is None else value <= limit
    return Check(name, mode, value, limit, "ms", _status(passed))


def _at_least(name: str, mode: str, value: float | None, limit: float | None) -> Check:
    passed = None if value is None or limit is None else value >= limit
    return Check(name, mode, value, limit, "req/s", _status(passed))


def _status(passed: bool | None) -> Status:
    if passed is None:
        return "not measured"
    return "pass" if passed else "miss"


def results_table(cells: Mapping[CellKey, Summary | None], title: str) -> Table:
    """One row per cell; latencies in ms, ``+`` columns added over direct."""
    table = Table(title=title, box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False)
    table.add_column("c", justify="right")
    table.add_column("mode", min_width=len("non-stream"))
    table.add_column("target", min_width=len("responses translated"))
    for column in ("ok", "err", "p50", "p99", "+p50", "+p99"):
        table.add_column(column, justify="right")
    table.add_column("ttfb p50", justify="right")
    table.add_column("req/s", justify="right")
    table.add_column("cpu ms/req", justify="right")
    for key in sorted(cells, key=CellKey.order):
        summary = cells[key]
        if summary is None:
            table.add_row(str(key.concurrency), key.mode, key.target, "[red]not measured[/red]")
            continue
        added = added_for(cells, key) if key.target not in DIRECTS else None
        table.add_row(
            str(key.concurrency),
            key.mode,
            key.target,
            str(summary.requests),
            f"[red]{summary.errors}[/red]" if summary.errors else "0",
            f"{summary.p50_ms:.2f}",
            f"{summary.p99_ms:.2f}",
            _ms(added[0] if added else None),
            _ms(added[1] if added else None),
            _number(summary.first_byte_p50_ms if key.stream else None, ""),
            f"{summary.requests_per_second:.0f}",
            _number(summary.server_cpu_ms, ""),
            end_section=key.target
            == max(
                (k.target for k in cells), key=lambda t: TARGETS.index(t) if t in TARGETS else 99
            ),
        )
    return table


def checks_table(checks: Iterable[Check]) -> Table:
    table = Table(title="Targets", box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False)
    for column in ("check", "mode", "value", "limit", "status"):
        table.add_column(column, justify="right" if column in ("value", "limit") else "left")
    colours = {"pass": "green", "miss": "red", "not measured": "yellow"}
    for check in checks:
        table.add_row(
            check.name,
            check.mode,
            _number(check.value, check.unit),
            _number(check.limit, check.unit),
            f"[{colours[check.status]}]{check.status}[/{colours[check.status]}]",
        )
    return table


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:+.2f}"


def _number(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    text = f"{value:.0f}" if unit in ("req/s", "requests") else f"{value:.2f}"
    return f"{text} {unit}".rstrip()


def cells_json(cells: Mapping[CellKey, Summary | None]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for key in sorted(cells, key=CellKey.order):
        summary = cells[key]
        row: dict[str, Any] = {
            "target": key.target,
            "concurrency": key.concurrency,
            "stream": key.stream,
            "measured": summary is not None,
        }
        if summary is not None:
            added = added_for(cells, key) if key.target not in DIRECTS else None
            row |= {
                "requests": summary.requests,
                "errors": summary.errors,
                "first_error": summary.first_error,
                "latency_ms": _pair(summary.p50_ms, summary.p99_ms),
                "first_byte_ms": (
                    _pair(summary.first_byte_p50_ms, summary.first_byte_p99_ms)
                    if key.stream
                    else None
                ),
                "added_ms": _pair(*added) if added else None,
                "requests_per_second": round(summary.requests_per_second, 1),
                "server_cpu_ms_per_request": _round(summary.server_cpu_ms),
            }
        rows.append(row)
    return rows


def checks_json(checks: Iterable[Check]) -> list[dict[str, Any]]:
    return [
        {
            "name": c.name,
            "mode": c.mode,
            "value": _round(c.value),
            "limit": _round(c.limit),
            "unit": c.unit,
            "status": c.status,
        }
        for c in checks
    ]


def _pair(p50: float | None, p99: float | None) -> dict[str, float | None]:
    return {"p50": _round(p50), "p99": _round(p99)}


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def plot_added(cells: Mapping[CellKey, Summary | None], path: Path, subtitle: str) -> None:
    """Added p50 and p99 by concurrency, toolgraph against LiteLLM (and against its own
    baseline, and ``/v1/responses``, when measured), one panel per mode."""
    figure = Figure(figsize=(11, 4.5), layout="constrained")
    axes = figure.subplots(1, 2, sharey=True)
    levels = sorted({key.concurrency for key in cells})
    styles = {
        "toolgraph": "tab:blue",
        "baseline": "tab:gray",
        "litellm": "tab:orange",
        "responses translated": "tab:green",
        "responses relayed": "tab:purple",
    }
    measured = {key.target for key in cells}
    for ax, stream in zip(axes, (False, True), strict=True):
        for proxy in (p for p in PROXIES if p in measured):
            added = [added_for(cells, CellKey(c, stream, proxy)) for c in levels]
            for index, (label, line) in enumerate((("p50", "-"), ("p99", "--"))):
                ys = [math.nan if a is None else a[index] for a in added]
                ax.plot(levels, ys, line, marker="o", color=styles[proxy], label=f"{proxy} {label}")
        ax.set_xscale("log", base=2)
        ax.set_xticks(levels, [str(c) for c in levels])
        ax.set_yscale("symlog", linthresh=1.0)
        ax.set_title("stream" if stream else "non-stream")
        ax.set_xlabel("concurrent requests")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("added latency over direct (ms)")
    axes[0].legend()
    figure.suptitle(f"Latency added by the proxy — {subtitle}")
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
