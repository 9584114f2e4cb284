"""Where an orchestrated request's time goes, with the model's own time taken out.

    python -m eval.bench_orchestrate [--requests 40] [--baseline REV] [--learning]

A real proxy (uvicorn, a process of its own, logging as ``toolgraph serve`` does) in
front of the fake upstream, which answers every prompt at once (arguments for the
built-in ``evaluate_expression``, a short answer), so what is left is toolgraph's own
work: loading the catalog, the no-tool gate and planning (embedding the request,
hybrid search over the catalog, the graph), running the tool in its sandbox,
compressing, and the answer's relay. Two plans:

* ``one tool``: the LLM-free policy, one call (``planner.policy: graph``);
* ``three branches``: the LLM policy with a scripted decomposition into three
  independent calls and a fourth that needs them, to compare the execute stage
  with the sum of the calls' own durations (the parallel speed-up in a request).

Every request asks about a number of its own, so that nothing a request embedded is
found again by the next one. ``--baseline REV`` serves the same requests from the
code at ``REV`` too, in another process at the same time, the two interleaved in
blocks, and the table gives each figure's ratio (this tree / ``REV``): the machine is
shared, so a before and an after taken at different times compare two loads.
``--learning`` serves this tree twice instead, with learning off and on (recording every
run and planning with what it learned), to the files ``bench_orchestrate_learning.*``.

Stage times come from each request's trace, wall time from the client (the official
SDK), toolgraph's own time (the request's time less its waits on the upstream; it
includes the tool's sandbox) from the ``x-toolgraph-overhead-ms`` header, sent with the
response's start (for a stream: before planning), and from the trace, taken when the
request ends (``timings.own``; a stream's too), the tools' time from the trace
(``timings.tools``: the wall time some tool was being called, overlapping calls once),
toolgraph's own time without the tools' (``own - tools``: the targets' figure), and CPU per
request from the proxy process (:mod:`eval._bench_arms`: the model and the sandbox run
in other processes, so it is toolgraph's own work). Results: a table here,
``eval/results/bench_orchestrate.json`` and ``eval/results/bench_orchestrate.png``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import platform
import re
import statistics
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import openai
from matplotlib.figure import Figure
from openai.types.chat import ChatCompletionMessageParam
from rich.console import Console
from rich.table import Table

from eval._bench_arms import ROOT, Arm, commit_of, serve_tree, tree_at
from testing.fake_upstream import FakeUpstream, Script

RESULTS = Path(__file__).resolve().parent / "results"
STAGES = ("gate", "plan", "execute", "answer")
ORCHESTRATE = {"toolgraph": {"mode": "orchestrate"}}
#: Requests per block; the arms take turns block by block.
BLOCK = 5
_numbers = itertools.count(1000)


def question(number: int) -> str:
    return f"Evaluate the expression 2*pi*{number} numerically."


def branches(number: int) -> dict[str, Any]:
    return {
        "subtasks": [
            {"id": "s1", "text": f"Evaluate sqrt({number})*7", "needs": []},
            {"id": "s2", "text": f"Evaluate log({number})*3", "needs": []},
            {"id": "s3", "text": f"Evaluate exp({number}/1000)", "needs": []},
            {
                "id": "s4",
                "text": f"Evaluate the sum of the three results for {number}",
                "needs": ["s1", "s2", "s3"],
            },
        ]
    }


def respond(request: dict[str, Any]) -> Script | None:
    """The model's side, instant: each prompt answered by what it asks."""
    messages = request.get("messages") or []
    system = str(messages[0].get("content") or "") if messages else ""
    user = str(messages[1].get("content") or "") if len(messages) > 1 else ""
    if system.startswith("You write the arguments"):
        task = re.search(r"Sub-task: (?:Evaluate )?(?:the expression )?([^\n]*)", user)
        expression = task.group(1).split(" numerically")[0] if task else "1"
        if "sum of the three" in expression:
            expression = "1 + 2 + 3"
        return Script(text=json.dumps({"expression": expression.rstrip(".")}))
    if system.startswith("You plan how to answer"):
        number = re.search(r"2\*pi\*(\d+)", user)
        return Script(text=json.dumps(branches(int(number.group(1)) if number else 1)))
    if system.startswith("You choose the tool for one step"):
        return Script(text=json.dumps({"choice": 1, "reason": "it evaluates"}))
    if system.startswith("You check a plan"):
        return Script(text=json.dumps({"verdict": "success", "reason": "fine"}))
    if system.startswith("You answer the user's last message"):
        return Script(text="The value is in the results above.")
    return None


def settings_for(upstream: FakeUpstream, data_dir: Path, policy: str) -> dict[str, Any]:
    return {
        "upstream_base_url": upstream.base_url,
        "upstream_api_key": "sk-bench-0123456789",
        "data_dir": str(data_dir),
        "planner": {"policy": policy, "memory_k": 0, "reflection_rounds": 0},
        "retriever": {"onnx_dir": str(data_dir.parent / "onnx")},
        "log_level": "warning",
    }


def one_request(client: openai.OpenAI, base: str, stream: bool) -> dict[str, Any]:
    messages: list[ChatCompletionMessageParam] = [
        {"role": "user", "content": question(next(_numbers))}
    ]
    started = time.perf_counter()
    first: float | None = None
    if stream:
        with client.chat.completions.with_streaming_response.create(
            model="fake-model",
            messages=messages,
            stream=True,
            extra_body=ORCHESTRATE,
        ) as response:
            headers = response.headers
            for _ in response.iter_lines():
                if first is None:
                    first = time.perf_counter() - started
    else:
        raw = client.chat.completions.with_raw_response.create(
            model="fake-model",
            messages=messages,
            extra_body=ORCHESTRATE,
        )
        headers = raw.headers
    wall = time.perf_counter() - started
    trace = httpx.get(
        f"{base}/v1/toolgraph/traces/{headers['x-toolgraph-trace-id']}",
        headers={"authorization": f"Bearer {client.api_key}"},  # the trace is its tenant's
        timeout=30,
    )
    calls = trace.json()["calls"]
    timings = trace.json()["timings"]
    return {
        "wall_ms": wall * 1000,
        "first_event_ms": None if first is None else first * 1000,
        "own_ms": float(headers.get("x-toolgraph-overhead-ms", "nan")),
        # the whole request's (a stream's header is sent before planning); older trees lack it
        "own_trace_ms": timings["own"] * 1000 if "own" in timings else math.nan,
        # the wall time some tool ran (its sandbox: connect, the child, the reply); older
        # trees lack it
        "tools_ms": timings["tools"] * 1000 if "tools" in timings else math.nan,
        "stages_ms": {k: v * 1000 for k, v in timings.items()},
        "calls_ms": [c["finished"] - c["started"] for c in calls if c["started"] is not None],
        "outcomes": [c["outcome"] for c in calls],
        "upstream_calls": trace.json()["upstream_calls"],
    }


def passthrough(client: openai.OpenAI) -> float:
    started = time.perf_counter()
    client.chat.completions.create(
        model="fake-model", messages=[{"role": "user", "content": question(next(_numbers))}]
    )
    return (time.perf_counter() - started) * 1000


def median(values: list[float]) -> float:
    values = [v for v in values if not math.isnan(v)]
    return round(statistics.median(values), 2) if values else math.nan


def summarise(rows: list[dict[str, Any]], cpu_seconds: float) -> dict[str, Any]:
    def p95(values: list[float]) -> float:
        return round(sorted(values)[int(0.95 * (len(values) - 1))], 2) if values else 0.0

    walls = [r["wall_ms"] for r in rows]
    return {
        "requests": len(rows),
        "wall_p50_ms": median(walls),
        "wall_p95_ms": p95(walls),
        "own_p50_ms": median([r["own_ms"] for r in rows]),
        "own_trace_p50_ms": median([r["own_trace_ms"] for r in rows]),
        "tools_p50_ms": median([r["tools_ms"] for r in rows]),
        # the target's figure: toolgraph's own time, the model's and the tools' left out
        "own_less_tools_p50_ms": median([r["own_trace_ms"] - r["tools_ms"] for r in rows]),
        "cpu_per_request_ms": round(1000 * cpu_seconds / max(1, len(rows)), 2),
        "first_event_p50_ms": median([r["first_event_ms"] for r in rows if r["first_event_ms"]]),
        "stages_p50_ms": {s: median([r["stages_ms"].get(s, 0.0) for r in rows]) for s in STAGES},
        "sum_of_calls_p50_ms": median([sum(r["calls_ms"]) for r in rows]),
        "calls": len(rows[0]["calls_ms"]) if rows else 0,
        "all_ok": all(o == "ok" for r in rows for o in r["outcomes"]),
        "upstream_calls": rows[0]["upstream_calls"] if rows else 0,
    }


def measure(arms: list[Arm], requests: int, stream: bool) -> dict[str, dict[str, Any]]:
    """``requests`` per arm, the arms taking turns every :data:`BLOCK` requests."""
    clients = {
        a.label: openai.OpenAI(base_url=f"{a.url}/v1", api_key="sk-x", max_retries=0) for a in arms
    }
    rows: dict[str, list[dict[str, Any]]] = {a.label: [] for a in arms}
    cpu = dict.fromkeys(rows, 0.0)
    while len(rows[arms[0].label]) < requests:
        for arm in arms:
            before = arm.cpu_seconds()
            for _ in range(min(BLOCK, requests - len(rows[arm.label]))):
                rows[arm.label].append(one_request(clients[arm.label], arm.url, stream))
            time.sleep(0.05)  # what a request left to the background (its trace, memory)
            cpu[arm.label] += arm.cpu_seconds() - before
    return {label: summarise(found, cpu[label]) for label, found in rows.items()}


def arms_for(
    stack: ExitStack,
    trees: dict[str, Path],
    upstream: FakeUpstream,
    data: Path,
    policy: str,
    extra: dict[str, dict[str, Any]],
) -> list[Arm]:
    arms = []
    for label, tree in trees.items():
        settings = settings_for(upstream, data / f"{label}-{policy}", policy)
        settings.update(extra.get(label, {}))
        arms.append(stack.enter_context(serve_tree(label, tree, settings)))
    for arm in arms:  # the catalog's first use, and each path warmed
        client = openai.OpenAI(base_url=f"{arm.url}/v1", api_key="sk-x", max_retries=0)
        for _ in range(3):
            one_request(client, arm.url, stream=False)
    return arms


def run(
    requests: int, trees: dict[str, Path], extra: dict[str, dict[str, Any]] | None = None
) -> dict[str, Any]:
    """``extra``: more settings of the arm a label names."""
    extra = extra or {}
    upstream = FakeUpstream(record=False).start()
    upstream.responder = respond
    results: dict[str, Any] = {"load_average_at_start": list(os.getloadavg())}
    try:
        with tempfile.TemporaryDirectory() as folder, ExitStack() as stack:
            arms = arms_for(stack, trees, upstream, Path(folder), "graph", extra)
            for arm in arms:
                client = openai.OpenAI(base_url=f"{arm.url}/v1", api_key="sk-x", max_retries=0)
                results[f"passthrough p50 ms, {arm.label}"] = median(
                    [passthrough(client) for _ in range(requests)]
                )
            for stream in (False, True):
                kind = "stream" if stream else "non-stream"
                for label, row in measure(arms, requests, stream).items():
                    results[f"one tool, {kind}, {label}"] = row
            stack.close()
            arms = arms_for(stack, trees, upstream, Path(folder), "llm", extra)
            for label, row in measure(arms, requests, False).items():
                results[f"three branches + join, non-stream, {label}"] = row
    finally:
        upstream.stop()
    results["load_average_at_end"] = list(os.getloadavg())
    return results


COLUMNS = (
    "gate",
    "plan",
    "execute",
    "Σ calls",
    "answer",
    "own (header)",
    "own (trace)",
    "tools",
    "own - tools",
    "cpu/req",
    "wall",
    "p95",
)


def _figures(row: dict[str, Any]) -> list[float]:
    stages = row["stages_p50_ms"]
    return [
        stages["gate"],
        stages["plan"],
        stages["execute"],
        row["sum_of_calls_p50_ms"],
        stages["answer"],
        row["own_p50_ms"],
        row.get("own_trace_p50_ms", math.nan),
        row.get("tools_p50_ms", math.nan),
        row.get("own_less_tools_p50_ms", math.nan),
        row["cpu_per_request_ms"],
        row["wall_p50_ms"],
        row["wall_p95_ms"],
    ]


def report(results: dict[str, Any], labels: list[str], console: Console) -> None:
    table = Table(title="orchestrate: toolgraph's own time per request (instant model), p50 ms")
    for column in ("request", "code", "calls", *COLUMNS):
        table.add_column(column, justify="right")
    for scenario in (
        "one tool, non-stream",
        "one tool, stream",
        "three branches + join, non-stream",
    ):
        rows = {label: results[f"{scenario}, {label}"] for label in labels}
        for label, row in rows.items():
            figures = ["-" if math.isnan(value) else f"{value:.1f}" for value in _figures(row)]
            table.add_row(scenario, label, str(row["calls"]), *figures)
        if len(labels) == 2:
            after, before = (_figures(rows[label]) for label in labels)
            ratios = [
                f"{a / b:.2f}x" if b and not math.isnan(a / b) else "-"
                for a, b in zip(after, before, strict=True)
            ]
            table.add_row(scenario, f"{labels[0]} / {labels[1]}", "", *ratios)
    console.print(table)
    passthrough = "; ".join(
        f"{label} {results[f'passthrough p50 ms, {label}']} ms" for label in labels
    )
    start, end = results["load_average_at_start"], results["load_average_at_end"]
    console.print(f"passthrough p50: {passthrough}; load average {start[0]:.2f} → {end[0]:.2f}")


def plot(results: dict[str, Any], path: Path) -> None:
    rows = {k: v for k, v in results.items() if isinstance(v, dict) and "stages_p50_ms" in v}
    figure = Figure(figsize=(9, 0.45 * len(rows) + 1.5))
    axes = figure.subplots()
    names = list(rows)
    left = [0.0] * len(names)
    for stage in STAGES:
        widths = [rows[n]["stages_p50_ms"][stage] for n in names]
        axes.barh(names, widths, left=left, label=stage)
        left = [a + b for a, b in zip(left, widths, strict=True)]
    axes.invert_yaxis()
    axes.set_xlabel("ms (p50), model answering instantly")
    start, end = results["load_average_at_start"][0], results["load_average_at_end"][0]
    axes.set_title(f"orchestrate: toolgraph's own time by stage (load {start:.1f} → {end:.1f})")
    axes.legend(loc="lower right")
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=40, help="requests per row and code")
    parser.add_argument(
        "--baseline", metavar="REV", help="also serve the code at this git revision, interleaved"
    )
    parser.add_argument(
        "--learning",
        action="store_true",
        help="this tree with learning off and on, interleaved (bench_orchestrate_learning.*)",
    )
    args = parser.parse_args()
    extra: dict[str, dict[str, Any]] = {}
    with ExitStack() as stack:
        trees = {"this tree": ROOT}
        if args.learning:
            trees = {"learning off": ROOT, "learning on": ROOT}
            extra = {"learning on": {"learning": {"enabled": True}}}
        if args.baseline:
            trees[commit_of(args.baseline)] = stack.enter_context(tree_at(args.baseline))
        results = run(args.requests, trees, extra)
    results["machine"] = {"cpus": os.cpu_count(), "python": platform.python_version()}
    results["baseline"] = args.baseline
    RESULTS.mkdir(exist_ok=True)
    name = "bench_orchestrate_learning" if args.learning else "bench_orchestrate"
    (RESULTS / f"{name}.json").write_text(json.dumps(results, indent=2) + "\n")
    plot(results, RESULTS / f"{name}.png")
    report(results, list(trees), Console(width=200))


if __name__ == "__main__":
    main()
