"""How much latency ``/v1/responses`` adds, translated and relayed, beside chat's.

    python -m eval.bench_responses            # 300 requests a cell, about 3 minutes
    python -m eval.bench_responses --quick    # 60 a cell

The overhead benchmark's servers and client (``eval._bench_services``,
``eval._bench_client``): one fake upstream answering after 20 ms that also speaks
the Responses API (``--responses``), and two toolgraph servers, one worker each,
behind a master key: one with ``upstream_responses=translate`` (the Responses
request becomes a chat completion and the answer a response) and one with
``native`` (the request and the answer relayed as they are). Added latency is
toolgraph's percentile minus the direct path's for the same API: chat and
translated Responses against the fake's chat completions, relayed Responses
against the fake's own ``/v1/responses``. Results: a table here and
``eval/results/bench_responses.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import os
import secrets
import sys
from pathlib import Path
from typing import Any

import orjson
import uvloop

from eval import _bench_services as services
from eval._bench_client import Cell, Endpoint, build_request
from eval._bench_report import summarize

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / ".bench"
RESULTS = ROOT / "eval" / "results" / "bench_responses.json"
CONCURRENCY = (1, 16)
QUESTION = "Which terminal does the morning flight from Paris to Oslo use?"
INSTRUCTIONS = "You are a concise assistant for a travel booking site. Answer in one sentence."

# target: (server, path, API); the direct path each is compared with
TARGETS = {
    "direct chat": ("fake", "/v1/chat/completions", "chat"),
    "direct responses": ("fake", "/v1/responses", "responses"),
    "toolgraph chat": ("translate", "/v1/chat/completions", "chat"),
    "toolgraph responses, translated": ("translate", "/v1/responses", "responses"),
    "toolgraph responses, relayed": ("native", "/v1/responses", "responses"),
}
BASELINE = {
    "toolgraph chat": "direct chat",
    "toolgraph responses, translated": "direct chat",
    "toolgraph responses, relayed": "direct responses",
}


def body(api: str, stream: bool) -> bytes:
    if api == "chat":
        request: dict[str, Any] = {
            "model": services.MODEL,
            "messages": [
                {"role": "system", "content": INSTRUCTIONS},
                {"role": "user", "content": QUESTION},
            ],
            "max_tokens": 128,
        }
        if stream:
            request |= {"stream": True, "stream_options": {"include_usage": True}}
    else:
        request = {
            "model": services.MODEL,
            "instructions": INSTRUCTIONS,
            "input": QUESTION,
            "max_output_tokens": 128,
            "store": False,  # nothing kept: the benchmark would fill the stores
        }
        if stream:
            request["stream"] = True
    return orjson.dumps(request)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="60 requests a cell")
    args = parser.parse_args(argv)
    requests, warmup = (60, 10) if args.quick else (300, 30)
    master_key = "sk-" + secrets.token_hex(32)
    with contextlib.ExitStack() as stack:
        ports = start(stack, master_key)
        rows = uvloop.run(measure(ports, master_key, requests, warmup))
    report(rows, requests)
    return 0


def start(stack: contextlib.ExitStack, master_key: str) -> dict[str, int]:
    fake_port = services.free_port()
    fake = services.fake_upstream_spec(fake_port, 20.0, ROOT)
    specs = {"fake": dataclasses.replace(fake, argv=[*fake.argv, "--responses"])}
    for support in ("translate", "native"):
        spec = services.toolgraph_spec(
            services.free_port(), fake_port, master_key, WORK / f"responses-{support}-data"
        )
        env = {**spec.env, "TOOLGRAPH_UPSTREAM_RESPONSES": support}
        specs[support] = dataclasses.replace(spec, name=f"toolgraph-{support}", env=env)
    for spec in specs.values():
        services.wait_ready(stack.enter_context(services.running(spec, os.environ, WORK)))
    return {name: spec.port for name, spec in specs.items()}


async def measure(
    ports: dict[str, int], master_key: str, requests: int, warmup: int
) -> list[dict[str, Any]]:
    rows = []
    for concurrency in CONCURRENCY:
        for stream in (False, True):
            for target, (server, path, api) in TARGETS.items():
                endpoint = Endpoint("127.0.0.1", ports[server], path)
                headers = {} if server == "fake" else {"authorization": f"Bearer {master_key}"}
                request = build_request(endpoint, body(api, stream), headers)
                samples = await Cell(endpoint, request, concurrency, stream).run(
                    warmup, requests, 60.0
                )
                summary = summarize(samples)
                if summary is None or summary.errors:
                    raise SystemExit(f"{target}: {samples.first_error}")
                rows.append(
                    {
                        "target": target,
                        "concurrency": concurrency,
                        "stream": stream,
                        "p50_ms": summary.p50_ms,
                        "p99_ms": summary.p99_ms,
                    }
                )
                print(
                    f"{target:34} c={concurrency:<3} stream={stream!s:5} "
                    f"p50 {summary.p50_ms:7.2f} ms  p99 {summary.p99_ms:7.2f} ms",
                    flush=True,
                )
    return rows


def report(rows: list[dict[str, Any]], requests: int) -> None:
    cell = {(r["target"], r["concurrency"], r["stream"]): r for r in rows}
    lines = [
        "| concurrency | mode | " + " | ".join(f"{t} +p50 / +p99" for t in BASELINE) + " |",
        "|---:|---|" + "---:|" * len(BASELINE),
    ]
    for concurrency in CONCURRENCY:
        for stream in (False, True):
            added = []
            for target, base in BASELINE.items():
                mine, theirs = cell[target, concurrency, stream], cell[base, concurrency, stream]
                p50, p99 = (mine[q] - theirs[q] for q in ("p50_ms", "p99_ms"))
                added.append(f"{p50:.2f} / {p99:.2f}")
            mode = "stream" if stream else "non-stream"
            lines.append(f"| {concurrency} | {mode} | " + " | ".join(added) + " |")
    table = "\n".join(lines)
    print(table)
    load = os.getloadavg()[0]
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_bytes(
        orjson.dumps(
            {
                "when": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                "load_average": load,
                "requests_per_cell": requests,
                "python": sys.version.split()[0],
                "cells": rows,
                "table": table,
            },
            option=orjson.OPT_INDENT_2,
        )
    )


if __name__ == "__main__":
    sys.exit(main())
