"""One built-in tool call through the sandbox, split in two: until the child's pid
arrives (a fork, or a spare waking), and from there to the reply (the call itself).

    python -m eval.bench_sandbox_call [--calls 100] [--rounds 3] [--baseline REV]

Each tree's sandbox is driven from a process of its own, started in that tree (the
fork server is ``python -m proxy.tools.forkserver``, found from the working folder),
with ``--baseline`` the rounds alternate between the trees so that the load falls on
both alike. Calls are sequential, 30 ms apart (a spare has time to be forked), each
``evaluate_expression`` on an expression of its own. Prints p50 ms per round and the
load average at the start and the end.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from contextlib import ExitStack
from pathlib import Path

from eval._bench_arms import ROOT, commit_of, tree_at

_PROBE = """
import asyncio, json, statistics, sys, time
from proxy.tools.forkserver import HEADER
from proxy.tools.sandbox import Sandbox

async def one(box, n):
    payload = json.dumps(
        {"name": "evaluate_expression", "arguments": {"expression": f"2*pi*{n}"}}
    ).encode()
    started = time.perf_counter()
    reader, writer = await asyncio.open_unix_connection(box._socket)
    await reader.readexactly(HEADER.size)
    child = time.perf_counter()
    writer.write(HEADER.pack(len(payload)) + payload)
    await writer.drain()
    size = HEADER.unpack(await reader.readexactly(HEADER.size))[0]
    await reader.readexactly(size)
    done = time.perf_counter()
    writer.close()
    return (child - started) * 1000, (done - child) * 1000

async def main(calls):
    box = Sandbox(timeout=30, memory_mb=1024)
    await box.start()
    try:
        for n in range(5):
            await one(box, n)
        rows = []
        for n in range(calls):
            rows.append(await one(box, 1000 + n))
            await asyncio.sleep(0.03)
    finally:
        await box.aclose()
    child, reply = (statistics.median(r[i] for r in rows) for i in (0, 1))
    print(json.dumps([child, reply]))

asyncio.run(main(int(sys.argv[1])))
"""


def probe(tree: Path, calls: int) -> tuple[float, float]:
    """p50 ms until the pid, and from the pid to the reply, of ``calls`` calls."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, str(calls)],
        cwd=tree,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    child, reply = json.loads(out.strip().splitlines()[-1])
    return child, reply


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--baseline", metavar="REV")
    args = parser.parse_args()
    print(f"load average at start {os.getloadavg()[0]:.2f}")
    with ExitStack() as stack:
        trees = {"this tree": ROOT}
        if args.baseline:
            trees[commit_of(args.baseline)] = stack.enter_context(tree_at(args.baseline))
        for round_ in range(1, args.rounds + 1):
            for label, tree in trees.items():
                child, reply = probe(tree, args.calls)
                print(
                    f"round {round_}, {label}: until the child's pid p50 {child:.2f} ms, "
                    f"the call p50 {reply:.2f} ms, together {child + reply:.2f} ms"
                )
    print(f"load average at end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
