"""Where an orchestrated request's time goes, with the model's own time taken out.

    python -m eval.bench_orchestrate [--requests 40]

A real proxy (uvicorn, in a thread) in front of the fake upstream, which answers
every prompt at once (arguments for the built-in ``evaluate_expression``, a short
answer), so what is left is toolgraph's own work: loading the catalog, planning
(embedding the request, hybrid search over the catalog, the graph), running the
tool in its sandbox, compressing, and the answer's relay. Two plans:

* ``one tool``: the LLM-free policy, one call (``planner.policy: graph``);
* ``three branches``: the LLM policy with a scripted decomposition into three
  independent calls and a fourth that needs them, to compare the execute stage
  with the sum of the calls' own durations (the parallel speed-up in a request).

Stage times come from each request's trace; wall and time to first event from
the client (the official SDK). Results: a table here,
``eval/results/bench_orchestrate.json`` and ``eval/results/bench_orchestrate.png``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import openai
from matplotlib.figure import Figure
from rich.console import Console
from rich.progress import track
from rich.table import Table

from eval._serve import serve_in_thread
from eval.fake_upstream import FakeUpstream, Script
from proxy.app import create_app
from proxy.config import load_settings

RESULTS = Path(__file__).resolve().parent / "results"
STAGES = ("plan", "execute", "answer")
ORCHESTRATE = {"toolgraph": {"mode": "orchestrate"}}
QUESTION = "Evaluate the expression 2*pi*50 numerically."
BRANCHES = {
    "subtasks": [
        {"id": "s1", "text": "Evaluate sqrt(2)*7", "needs": []},
        {"id": "s2", "text": "Evaluate log(10)*3", "needs": []},
        {"id": "s3", "text": "Evaluate exp(1.5)", "needs": []},
        {"id": "s4", "text": "Evaluate the sum of the three results", "needs": ["s1", "s2", "s3"]},
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
        return Script(text=json.dumps(BRANCHES))
    if system.startswith("You choose the tool for one step"):
        return Script(text=json.dumps({"choice": 1, "reason": "it evaluates"}))
    if system.startswith("You check a plan"):
        return Script(text=json.dumps({"verdict": "success", "reason": "fine"}))
    if system.startswith("You answer the user's last message"):
        return Script(text="The value is in the results above.")
    return None


@contextmanager
def proxy(upstream: FakeUpstream, data_dir: Path, policy: str) -> Iterator[str]:
    settings = load_settings(
        upstream_base_url=upstream.base_url,
        upstream_api_key="sk-bench-0123456789",
        data_dir=data_dir,
        planner={"policy": policy, "memory_k": 0, "reflection_rounds": 0},
        log_level="warning",
    )
    with serve_in_thread(create_app(settings)) as url:
        yield url


def one_request(client: openai.OpenAI, base: str, stream: bool) -> dict[str, Any]:
    started = time.perf_counter()
    first: float | None = None
    if stream:
        with client.chat.completions.with_streaming_response.create(
            model="fake-model",
            messages=[{"role": "user", "content": QUESTION}],
            stream=True,
            extra_body=ORCHESTRATE,
        ) as response:
            trace_id = response.headers["x-toolgraph-trace-id"]
            for _ in response.iter_lines():
                if first is None:
                    first = time.perf_counter() - started
    else:
        raw = client.chat.completions.with_raw_response.create(
            model="fake-model",
            messages=[{"role": "user", "content": QUESTION}],
            extra_body=ORCHESTRATE,
        )
        trace_id = raw.headers["x-toolgraph-trace-id"]
    wall = time.perf_counter() - started
    trace = httpx.get(f"{base}/v1/toolgraph/traces/{trace_id}", timeout=30).json()
    calls = trace["calls"]
    return {
        "wall_ms": wall * 1000,
        "first_event_ms": None if first is None else first * 1000,
        "stages_ms": {k: v * 1000 for k, v in trace["timings"].items()},
        "calls_ms": [c["finished"] - c["started"] for c in calls if c["started"] is not None],
        "outcomes": [c["outcome"] for c in calls],
        "upstream_calls": trace["upstream_calls"],
    }


def passthrough(client: openai.OpenAI) -> float:
    started = time.perf_counter()
    client.chat.completions.create(
        model="fake-model", messages=[{"role": "user", "content": QUESTION}]
    )
    return (time.perf_counter() - started) * 1000


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    def median(values: list[float]) -> float:
        return round(statistics.median(values), 2) if values else 0.0

    def p95(values: list[float]) -> float:
        return round(sorted(values)[int(0.95 * (len(values) - 1))], 2) if values else 0.0

    walls = [r["wall_ms"] for r in rows]
    return {
        "requests": len(rows),
        "wall_p50_ms": median(walls),
        "wall_p95_ms": p95(walls),
        "first_event_p50_ms": median([r["first_event_ms"] for r in rows if r["first_event_ms"]]),
        "stages_p50_ms": {s: median([r["stages_ms"].get(s, 0.0) for r in rows]) for s in STAGES},
        "sum_of_calls_p50_ms": median([sum(r["calls_ms"]) for r in rows]),
        "calls": len(rows[0]["calls_ms"]) if rows else 0,
        "all_ok": all(o == "ok" for r in rows for o in r["outcomes"]),
        "upstream_calls": rows[0]["upstream_calls"] if rows else 0,
    }


def run(requests: int) -> dict[str, Any]:
    upstream = FakeUpstream(record=False).start()
    upstream.responder = respond
    results: dict[str, Any] = {}
    try:
        with tempfile.TemporaryDirectory() as folder:
            data = Path(folder)
            with proxy(upstream, data / "graph-policy", "graph") as base:
                client = openai.OpenAI(base_url=f"{base}/v1", api_key="sk-x", max_retries=0)
                cold = one_request(client, base, stream=False)
                results["cold_first_request"] = {
                    "wall_ms": round(cold["wall_ms"], 1),
                    "catalog_ms": round(cold["stages_ms"].get("catalog", 0.0), 1),
                }
                results["passthrough_p50_ms"] = round(
                    statistics.median(passthrough(client) for _ in range(requests)), 2
                )
                for stream in (False, True):
                    rows = [
                        one_request(client, base, stream)
                        for _ in track(range(requests), description=f"one tool, stream={stream}")
                    ]
                    results[f"one tool, {'stream' if stream else 'non-stream'}"] = summarise(rows)
            with proxy(upstream, data / "llm-policy", "llm") as base:
                client = openai.OpenAI(base_url=f"{base}/v1", api_key="sk-x", max_retries=0)
                one_request(client, base, stream=False)  # load the catalog
                rows = [
                    one_request(client, base, stream=False)
                    for _ in track(range(requests), description="three branches + join")
                ]
                results["three branches + join, non-stream"] = summarise(rows)
    finally:
        upstream.stop()
    return results


def report(results: dict[str, Any], console: Console) -> None:
    table = Table(title="orchestrate: toolgraph's own time per request (instant model), p50 ms")
    for column in ("request", "calls", "plan", "execute", "Σ calls", "answer", "wall", "p95"):
        table.add_column(column, justify="right")
    for name, row in results.items():
        if not isinstance(row, dict) or "stages_p50_ms" not in row:
            continue
        stages = row["stages_p50_ms"]
        table.add_row(
            name,
            str(row["calls"]),
            f"{stages['plan']:.1f}",
            f"{stages['execute']:.1f}",
            f"{row['sum_of_calls_p50_ms']:.1f}",
            f"{stages['answer']:.1f}",
            f"{row['wall_p50_ms']:.1f}",
            f"{row['wall_p95_ms']:.1f}",
        )
    console.print(table)
    console.print(
        f"passthrough p50 {results['passthrough_p50_ms']} ms; first orchestrate request "
        f"{results['cold_first_request']['wall_ms']} ms "
        f"(catalog load {results['cold_first_request']['catalog_ms']} ms)"
    )


def plot(results: dict[str, Any], path: Path) -> None:
    rows = {k: v for k, v in results.items() if isinstance(v, dict) and "stages_p50_ms" in v}
    figure = Figure(figsize=(8, 3.5))
    axes = figure.subplots()
    names = list(rows)
    left = [0.0] * len(names)
    for stage in STAGES:
        widths = [rows[n]["stages_p50_ms"][stage] for n in names]
        axes.barh(names, widths, left=left, label=stage)
        left = [a + b for a, b in zip(left, widths, strict=True)]
    axes.set_xlabel("ms (p50), model answering instantly")
    axes.set_title("orchestrate: toolgraph's own time by stage")
    axes.legend(loc="lower right")
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=40, help="requests per row")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    results = run(args.requests)
    results["machine"] = {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "load_average": os.getloadavg()[0],
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "bench_orchestrate.json").write_text(json.dumps(results, indent=2) + "\n")
    plot(results, RESULTS / "bench_orchestrate.png")
    report(results, Console())


if __name__ == "__main__":
    main()
