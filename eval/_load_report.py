"""The load benchmark's figures: summaries, target checks, a table, markdown, a plot."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure
from rich.console import Console
from rich.table import Table

from eval._bench_report import percentile
from eval._load_client import NO_ANSWER, Load, Outcome

RSS_GROWTH_LIMIT = 0.10
# Errors ending this long after Redis is back still count as the outage's: requests
# that were waiting on the dead connection when it came back.
RECOVERY_GRACE_SECONDS = 5.0


def orchestrate_summary(
    load: Load, answered: Collection[int], marks: Mapping[str, float]
) -> dict[str, Any]:
    """Scenario A or B: counts, latency, and (B) the errors by phase of the outage."""
    summary = summarize(load.outcomes, load.elapsed)
    failed = [o for o in load.outcomes if not o.complete]
    summary["answer_written_then_error"] = sum(1 for o in failed if o.index in answered)
    summary["not_a_retryable_503"] = sum(1 for o in failed if o.status != 503 or not o.retryable)
    if marks:
        summary["redis"] = dict(marks)
        summary["errors_by_phase"] = _by_phase(failed, marks)
    return summary


def passthrough_summary(load: Load, rss: Mapping[str, Any], target: int) -> dict[str, Any]:
    """Scenario C: counts, latency, the RSS samples and their growth."""
    summary = summarize(load.outcomes, load.elapsed)
    summary["rss"] = dict(rss)
    first, second = rss.get("after_first_half"), rss.get("after_second_half")
    if first and second:
        summary["rss_growth"] = round(second["mib"] / first["mib"] - 1, 4)
    summary["reached_target_requests"] = len(load.outcomes) >= target
    return summary


def summarize(outcomes: list[Outcome], elapsed: float) -> dict[str, Any]:
    """Counts, errors by status (and the first of each), latency percentiles, a timeline."""
    answered = [o.latency for o in outcomes if o.complete]
    errors = Counter(_status(o) for o in outcomes if not o.complete)
    first_error: dict[str, str] = {}
    for o in outcomes:
        if not o.complete:
            first_error.setdefault(_status(o), o.error[:300])
    return {
        "requests": len(outcomes),
        "answered": len(answered),
        "http_5xx": sum(1 for o in outcomes if 500 <= o.status < 600),
        "http_500": sum(1 for o in outcomes if o.status == 500),
        "errors_by_status": dict(sorted(errors.items())),
        "retryable_errors": sum(1 for o in outcomes if not o.complete and o.retryable),
        "first_error_by_status": first_error,
        "p50_ms": round(percentile(answered, 50) * 1000, 1) if answered else None,
        "p99_ms": round(percentile(answered, 99) * 1000, 1) if answered else None,
        "answered_per_second": round(len(answered) / elapsed, 1) if elapsed else 0.0,
        "seconds": round(elapsed, 1),
        "timeline": _timeline(outcomes),
    }


def _status(outcome: Outcome) -> str:
    return "no answer" if outcome.status == NO_ANSWER else str(outcome.status)


def _by_phase(failed: Iterable[Outcome], marks: Mapping[str, float]) -> dict[str, int]:
    killed = marks.get("redis_killed_s", float("inf"))
    back = marks.get("redis_back_s", float("inf")) + RECOVERY_GRACE_SECONDS
    phases = Counter(
        "before" if o.ended < killed else "during" if o.ended < back else "after" for o in failed
    )
    return {phase: phases[phase] for phase in ("before", "during", "after")}


def _timeline(outcomes: Iterable[Outcome]) -> list[dict[str, Any]]:
    """Per second of the run (by when a request ended): answered, errors, p50 latency."""
    seconds: dict[int, list[Outcome]] = {}
    for o in outcomes:
        seconds.setdefault(int(o.ended), []).append(o)
    rows = []
    for second in range(max(seconds, default=-1) + 1):  # quiet seconds too, as zeros
        ended = seconds.get(second, [])
        latencies = [o.latency for o in ended if o.complete]
        rows.append(
            {
                "second": second,
                "answered": len(latencies),
                "errors": len(ended) - len(latencies),
                "p50_ms": round(percentile(latencies, 50) * 1000, 1) if latencies else None,
            }
        )
    return rows


def checks(results: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each target of the issue with what was measured and pass or miss."""
    found: list[dict[str, Any]] = []
    if "a" in results:
        a = results["a"]
        found.append(_check("A: no 5xx", a["http_5xx"] == 0, f"{a['http_5xx']} of {a['requests']}"))
    if "b" in results:
        b = results["b"]
        lost = b["answer_written_then_error"]
        found.append(_check("B: no answered request turned into an error", lost == 0, f"{lost}"))
        found.append(_check("B: no 500", b["http_500"] == 0, f"{b['http_500']}"))
        other = b["not_a_retryable_503"]
        found.append(_check("B: every error a retryable 503", other == 0, f"{other} not"))
        after = b.get("errors_by_phase", {}).get("after", 0)
        found.append(_check("B: no error once Redis is back (+5 s)", after == 0, f"{after}"))
    if "c" in results:
        c = results["c"]
        growth = c.get("rss_growth")
        shown = "not measured" if growth is None else f"{growth:+.1%}"
        passed = growth is not None and growth <= RSS_GROWTH_LIMIT and c["reached_target_requests"]
        found.append(_check("C: RSS at the end within 10 % of half-way", passed, shown))
        found.append(_check("C: no errors", not c["errors_by_status"], str(c["errors_by_status"])))
    if "d" in results:
        d = results["d"]
        errors = d["errors_by_status"]
        found.append(_check("D: the benign tenant gets no error beside the hostile one",
                            not errors and d["requests"] > 0, str(errors or "none")))  # fmt: skip
        refused = d["hostile"]["errors_by_status"].get("429", 0)
        found.append(_check("D: the hostile tenant's own key share refuses it (429)",
                            refused > 0, f"{refused} refused with 429"))  # fmt: skip
    return found


def _check(name: str, passed: bool, measured: str) -> dict[str, Any]:
    return {"target": name, "measured": measured, "status": "pass" if passed else "miss"}


SCENARIOS = {
    "a": "A: orchestrate",
    "b": "B: orchestrate, Redis killed",
    "c": "C: passthrough streams",
    "d": "D: benign tenant beside a hostile one",
}
COLUMNS = ("scenario", "requests", "answered", "5xx", "errors by status", "p50 ms", "p99 ms",
           "answered/s", "load avg")  # fmt: skip


def _row(letter: str, s: Mapping[str, Any]) -> list[str]:
    errors = ", ".join(f"{k}: {v}" for k, v in s["errors_by_status"].items()) or "none"
    return [
        SCENARIOS[letter],
        f"{s['requests']:,}",
        f"{s['answered']:,}",
        str(s["http_5xx"]),
        errors,
        str(s["p50_ms"]),
        str(s["p99_ms"]),
        str(s["answered_per_second"]),
        f"{s['load_average']['after']:.1f}",
    ]


def table(results: Mapping[str, Any]) -> Table:
    shown = Table(title="load: what held")
    for column in COLUMNS:
        shown.add_column(
            column, justify="left" if column in ("scenario", "errors by status") else "right"
        )
    for letter in SCENARIOS:
        if letter in results:
            shown.add_row(*_row(letter, results[letter]))
    return shown


def markdown(results: Mapping[str, Any]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|---" * len(COLUMNS) + "|"]
    for letter in SCENARIOS:
        if letter in results:
            lines.append("| " + " | ".join(_row(letter, results[letter])) + " |")
    if "d" in results:
        lines += ["", *_tenants(results["d"])]
    lines += ["", "| target | measured | status |", "|---|---|---|"]
    for check in results.get("checks", []):
        status = check["status"] if check["status"] == "pass" else f"**{check['status']}**"
        lines.append(f"| {check['target']} | {check['measured']} | {status} |")
    return "\n".join(lines) + "\n"


def _tenants(d: Mapping[str, Any]) -> list[str]:
    """Scenario D's two tenants, and the benign one alone, one row each."""
    lines = ["| D: tenant | requests | answered | errors by status | p50 / p99 ms |",
             "|---|---:|---:|---|---:|"]  # fmt: skip
    for name, s in (("benign, alone", d["alone"]), ("benign, beside the hostile one", d),
                    ("hostile", d["hostile"])):  # fmt: skip
        errors = ", ".join(f"{k}: {v}" for k, v in s["errors_by_status"].items()) or "none"
        latency = f"{s['p50_ms']} / {s['p99_ms']}"
        lines.append(f"| {name} | {s['requests']:,} | {s['answered']:,} | {errors} | {latency} |")
    return lines


def plot(results: Mapping[str, Any], path: Path) -> None:
    """Answers and errors per second (A, B, the outage shaded); RSS against requests (C)."""
    shown = [letter for letter in SCENARIOS if letter in results]
    figure = Figure(figsize=(5 * len(shown), 3.6))
    for axes, letter in zip(figure.subplots(1, len(shown), squeeze=False)[0], shown, strict=True):
        s = results[letter]
        axes.set_title(SCENARIOS[letter])
        if letter == "c":
            done, mib = zip(*s["rss"]["samples"], strict=True) if s["rss"]["samples"] else ((), ())
            axes.plot(done, mib)
            axes.set_xlabel("requests done")
            axes.set_ylabel("proxy RSS, MiB")
            continue
        timeline = s["timeline"]
        x = [row["second"] for row in timeline]
        # Errors as bars under the answers' line: the two are often equal in an outage.
        errors = [row["errors"] for row in timeline]
        axes.bar(x, errors, width=1.0, color="tab:red", alpha=0.5, label="errors/s")
        axes.plot(x, [row["answered"] for row in timeline], label="answered/s")
        if "redis" in s:
            axes.axvspan(s["redis"].get("redis_killed_s", 0), s["redis"].get("redis_back_s", 0),
                         color="grey", alpha=0.3, label="Redis down")  # fmt: skip
        axes.set_xlabel("seconds")
        axes.legend(loc="upper right")
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def write_results(results: dict[str, Any], out: Path, console: Console) -> None:
    """Add the checks; write JSON, markdown and the plot to ``out``; print the table."""
    results["checks"] = checks(results)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench_load.json").write_text(json.dumps(results, indent=1) + "\n")
    (out / "bench_load.md").write_text(markdown(results))
    plot(results, out / "bench_load.png")
    console.print(table(results))
