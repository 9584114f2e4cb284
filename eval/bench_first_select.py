"""What the first select request pays beyond embedding its tools: CPU, in process.

    python -m eval.bench_first_select [--processes 3]
    python -m eval.bench_first_select --client-tools 300,5000 [--short]

``--client-tools``: what a select request with many tools never seen costs (issue 15),
with Redis as the embeddings' shared cache (a redis-server of its own on a free port).
A first process sends each size once, cold; a second process, with its own empty
in-process cache, sends the same requests again and finds the vectors in Redis. The
tools are toolbench_stable's APIs in OpenAI's format (real descriptions and
parameters, so real lengths: most of the first ones reach the 256-token cut), or with
``--short`` the first-request benchmark's twelve tools in new variants (about 30
tokens each). Each row: wall and CPU seconds, texts and token positions
the encoder computed (its own counters), and the longest the event loop went without
running (a ticker every 5 ms), which is what other requests on the process wait.

Each process loads select mode's model as start-up does (``SelectService.start``: the
encoder loaded, no forward pass run yet, as after a start on a data folder whose
catalog is already indexed), then selects among :mod:`eval.bench_first_request`'s
twelve client tools: first the tools it will see again, then the same tools (all
cached), then four times twelve tools it has never seen. Each selection's CPU time
(``time.process_time``, this process's threads together) is what other load on a shared
machine moves least; wall time is printed beside it. If the first selection costs
more CPU than a later one with new tools, that difference is a warm-up that start-up
could pay; if not, the first request's cost is the tools' embedding, which no start-up
can pay before the client sends them.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from eval.bench_first_request import body
from eval.ports import free_port
from proxy.config import Settings
from proxy.protocol.chat import parse_request
from proxy.select.service import SelectService

CORPUS = Path(__file__).resolve().parent.parent.parent / "shared/data/toolbench_stable"

ROUNDS = (("first", None), ("same tools", None), *((f"new tools {n}", n) for n in range(1, 5)))


async def one_process() -> str:
    select = SelectService(Settings().retriever)
    await select.start()
    cells = []
    try:
        for _label, variant in ROUNDS:
            request = body("select", variant)
            cpu, wall = time.process_time(), time.perf_counter()
            await select.rewrite(parse_request(request), request)
            cpu_ms, wall_ms = (
                1000 * (time.process_time() - cpu),
                1000 * (time.perf_counter() - wall),
            )
            cells.append(f"{cpu_ms:.0f} / {wall_ms:.0f}")
    finally:
        select.close()
    return "| " + " | ".join(cells) + " |"


def short_tools(count: int) -> list[dict[str, Any]]:
    """``count`` tools of :mod:`eval.bench_first_request`'s twelve, each variant with its
    own names and descriptions (the new tools of issue 15's first measurement)."""
    tools: list[dict[str, Any]] = []
    variant = 1000
    while len(tools) < count:
        tools += body("select", variant)["tools"]
        variant += 1
    return tools[:count]


def client_tools(count: int, corpus: Path = CORPUS) -> list[dict[str, Any]]:
    """The first ``count`` APIs of the corpus as OpenAI function tools (unique names)."""
    tools: list[dict[str, Any]] = []
    with gzip.open(corpus / "corpus.jsonl.gz", "rt") as lines:
        for index, line in enumerate(lines):
            if len(tools) == count:
                break
            row = json.loads(line)
            name = re.sub(r"[^A-Za-z0-9_]", "_", str(row.get("api_name") or "api"))[:48]
            properties = {
                str(p["name"]): {"type": "string", "description": str(p.get("description") or "")}
                for key in ("required_parameters", "optional_parameters")
                for p in row.get(key) or []
                if isinstance(p, dict) and p.get("name")
            }
            function = {
                "name": f"{name}_{index}",
                "description": str(row.get("api_description") or row.get("tool_description")),
                "parameters": {"type": "object", "properties": properties},
            }
            tools.append({"type": "function", "function": function})
    return tools


async def one_client_tools_process(
    sizes: list[int], redis_url: str, short: bool
) -> list[dict[str, Any]]:
    """Each size's request once, in this process (the Redis cache may be warm)."""
    from redis.asyncio import Redis

    redis = Redis.from_url(redis_url)
    select = SelectService(Settings().retriever, redis)
    encoder = await select.encoder()
    rows = []
    offset = 0
    try:
        for size in sizes:
            make = short_tools if short else client_tools
            tools = make(offset + size)[offset:]  # no tool shared between sizes
            offset += size
            request = {
                "model": "m",
                "messages": [{"role": "user", "content": "What's the weather in Paris?"}],
                "tools": tools,
                "toolgraph": {"mode": "select"},
            }
            counts = (encoder.counts.texts, encoder.counts.tokens)
            stall = _LoopStall()
            cpu, wall = time.process_time(), time.perf_counter()
            async with stall:
                await select.rewrite(parse_request(request), request)
            rows.append(
                {
                    "tools": size,
                    "wall_s": round(time.perf_counter() - wall, 2),
                    "cpu_s": round(time.process_time() - cpu, 2),
                    "texts_encoded": encoder.counts.texts - counts[0],
                    "token_positions": encoder.counts.tokens - counts[1],
                    "longest_loop_stall_ms": round(stall.longest * 1000, 1),
                }
            )
    finally:
        select.close()
        await redis.aclose()
    return rows


class _LoopStall:
    """The longest gap between two ticks of a 5 ms ticker while the block runs."""

    def __init__(self) -> None:
        self.longest = 0.0
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> None:
        self._task = asyncio.create_task(self._tick())

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()

    async def _tick(self) -> None:
        last = time.perf_counter()
        while True:
            await asyncio.sleep(0.005)
            now = time.perf_counter()
            self.longest = max(self.longest, now - last - 0.005)
            last = now


def client_tools_table(sizes: list[int], short: bool) -> None:
    port = free_port()
    server = subprocess.Popen(
        ["redis-server", "--port", str(port), "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
    )
    try:
        time.sleep(0.5)
        url = f"redis://127.0.0.1:{port}/0"
        load_before = os.getloadavg()
        results = {}
        for label in ("cold (first process)", "warm from Redis (second process)"):
            child = [sys.executable, "-m", "eval.bench_first_select", "--child-tools"]
            child += [",".join(map(str, sizes)), "--redis", url] + (["--short"] if short else [])
            done = subprocess.run(child, capture_output=True, text=True, timeout=3600, check=True)
            results[label] = json.loads(done.stdout.strip().splitlines()[-1])
        load_after = os.getloadavg()
    finally:
        server.terminate()
        server.wait(10)
    print("| request | tools | wall s | cpu s | texts encoded | token positions | loop stall ms |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for label, rows in results.items():
        for row in rows:
            print(
                f"| {label} | {row['tools']} | {row['wall_s']} | {row['cpu_s']} | "
                f"{row['texts_encoded']} | {row['token_positions']} | "
                f"{row['longest_loop_stall_ms']} |"
            )
    cold, warm = results.values()
    for c, w in zip(cold, warm, strict=True):
        print(f"\n{c['tools']} tools: warm / cold wall {w['wall_s'] / c['wall_s']:.4f}", end="")
    before, after = (", ".join(f"{x:.2f}" for x in load) for load in (load_before, load_after))
    print(f"\n\nload average (1, 5, 15 min) before {before}, after {after}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int, default=3, help="fresh processes, one a row")
    parser.add_argument(
        "--client-tools", help="sizes of select requests of new tools, e.g. 300,5000 (Redis)"
    )
    parser.add_argument(
        "--short",
        action="store_true",
        help="with --client-tools: the first-request benchmark's short tools, not toolbench's",
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--child-tools", help=argparse.SUPPRESS)
    parser.add_argument("--redis", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(asyncio.run(one_process()), flush=True)
        return 0
    if args.child_tools:
        sizes = [int(n) for n in args.child_tools.split(",")]
        print(
            json.dumps(asyncio.run(one_client_tools_process(sizes, args.redis, args.short))),
            flush=True,
        )
        return 0
    if args.client_tools:
        client_tools_table([int(n) for n in args.client_tools.split(",")], args.short)
        return 0
    print("| " + " | ".join(f"{label} cpu / wall ms" for label, _ in ROUNDS) + " |")
    print("|" + "---:|" * len(ROUNDS))
    load_before = os.getloadavg()
    for _ in range(args.processes):
        child = [sys.executable, "-m", "eval.bench_first_select", "--child"]
        done = subprocess.run(child, capture_output=True, text=True, timeout=600, check=True)
        print(done.stdout.strip().splitlines()[-1], flush=True)
    before, after = (", ".join(f"{x:.2f}" for x in load) for load in (load_before, os.getloadavg()))
    print(f"\nload average (1, 5, 15 min) before {before}, after {after}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
