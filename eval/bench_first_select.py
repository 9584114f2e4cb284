"""What the first select request pays beyond embedding its tools: CPU, in process.

    python -m eval.bench_first_select [--processes 3]

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
import os
import subprocess
import sys
import time

from eval.bench_first_request import body
from proxy.config import Settings
from proxy.protocol.chat import parse_request
from proxy.select.service import SelectService

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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int, default=3, help="fresh processes, one a row")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(asyncio.run(one_process()), flush=True)
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
