"""Instructions a request costs toolgraph, counted by callgrind: a figure load does not move.

    python -m eval.bench_instructions --out .bench/cg-new.out
    python -m eval.bench_instructions --source .bench/baseline --out .bench/cg-old.out
    callgrind_annotate .bench/cg-new.out.1 | grep TOTALS   # then divide by --requests

On a shared machine the server's CPU time per request moves by tens of percent with
the load (``eval.bench_overhead`` reports it); the number of instructions it runs does
not. This starts the fake upstream and one toolgraph worker under ``valgrind
--tool=callgrind``, from ``--source`` (a checkout: ``.bench/baseline`` is the one
``bench_overhead --baseline`` makes), warms it up uninstrumented, then counts only the
measured requests (``callgrind_control -i on``, then a dump). Allow about a minute per
100 requests. Python's garbage collector shows up as ``gc_collect_main``: a full
collection lands in some windows and not in others, so compare totals without it too.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import secrets
import subprocess
import sys
from pathlib import Path

import uvloop

from eval import _bench_services as services
from eval._bench_client import Cell, Endpoint, build_request
from eval.bench_overhead import request_body
from eval.ports import free_port

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / ".bench"


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    key = "sk-" + secrets.token_hex(16)
    upstream_port, port = free_port(), free_port()
    upstream = services.fake_upstream_spec(upstream_port, 20.0, ROOT)
    spec = _under_callgrind(port, upstream_port, key, Path(args.source), Path(args.out))
    endpoint = Endpoint("127.0.0.1", port)
    request = build_request(endpoint, request_body(args.stream), {"authorization": f"Bearer {key}"})
    with contextlib.ExitStack() as stack:
        services.wait_ready(stack.enter_context(services.running(upstream, os.environ, WORK)))
        server = stack.enter_context(services.running(spec, os.environ, WORK))
        services.wait_ready(server)
        pid = str(server.process.pid)  # valgrind runs the program in its own process
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            warmup = Cell(endpoint, request, args.concurrency, args.stream)
            runner.run(warmup.run(args.warmup, 0, 600))
            subprocess.run(["callgrind_control", "-i", "on", pid], check=True, capture_output=True)
            cell = Cell(endpoint, request, args.concurrency, args.stream)
            samples = runner.run(cell.run(0, args.requests, 900))
            subprocess.run(["callgrind_control", "-d", pid], check=True, capture_output=True)
    print(f"{cell.done} requests counted, {samples.errors} failed; profile in {args.out}.1")
    return 0 if samples.errors == 0 else 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m eval.bench_instructions", description=__doc__)
    parser.add_argument("--source", default=str(ROOT), help="the checkout to run (this tree)")
    parser.add_argument("--out", required=True, help="callgrind's output file")
    parser.add_argument("--requests", type=int, default=400, help="requests counted (400)")
    parser.add_argument("--warmup", type=int, default=200, help="requests first, uncounted (200)")
    parser.add_argument("--concurrency", type=int, default=16, help="(16)")
    parser.add_argument("--no-stream", dest="stream", action="store_false", help="whole answers")
    return parser


def _under_callgrind(
    port: int, upstream_port: int, key: str, source: Path, out: Path
) -> services.ServerSpec:
    """toolgraph from ``source`` as the overhead benchmark runs it, under callgrind with
    counting off until the measured requests begin."""
    plain = services.toolgraph_spec(port, upstream_port, key, WORK / "instructions-data")
    valgrind = ["valgrind", "--tool=callgrind", "--instr-atstart=no"]
    valgrind.append(f"--callgrind-out-file={out.resolve()}")
    return services.ServerSpec(
        name="toolgraph under callgrind",
        port=port,
        argv=[*valgrind, sys.executable, "-m", "proxy", "serve", "--port", str(port)],
        env=plain.env | {"PYTHONPATH": str(source.resolve())},
        unset=(*plain.unset, "PYTHONPATH"),
        health_path=plain.health_path,
        ready_timeout=600,
    )


if __name__ == "__main__":
    raise SystemExit(main())
