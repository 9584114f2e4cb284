"""One client's expensive built-in calls against another client's cheap one.

``python -m eval.sandbox_fairness [--per-client N ...]``: for each per-client
limit, client ``a`` starts 8 plans calling ``factorial(10**8)`` and 4 integrating
``(a+b+c+d+x)**300`` (one call each, as 12 requests would); once its calls hold
their slots, client ``b`` asks for ``2*pi*50``. Prints how long ``b`` waited and
how long ``a``'s calls took, with the executor's default limits otherwise
(``max_per_host`` 4, a 10 s sandbox timeout). With a per-client limit of 4 the
client holds every slot, but its surplus calls queue behind its own limit, so
``b`` waits one round of them; before there was a per-client limit, ``b`` queued
behind all of them (30.3 s, the figures are in ``proxy/execute/scheduler.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import time

from pydantic import JsonValue

from proxy.config import Executor
from proxy.execute.plan import PlanNode, ToolPlan
from proxy.execute.scheduler import CallRecord
from proxy.execute.service import ToolExecutor
from proxy.tools.catalog import builtin_tools

FACTORIAL: tuple[str, dict[str, JsonValue]] = (
    "evaluate_expression",
    {"expression": "factorial(10**8)"},
)
INTEGRAL: tuple[str, dict[str, JsonValue]] = (
    "calculate_integral",
    {"expression": "(a+b+c+d+x)**300"},
)
EXPENSIVE = [FACTORIAL] * 8 + [INTEGRAL] * 4
CHEAP: tuple[str, dict[str, JsonValue]] = ("evaluate_expression", {"expression": "2*pi*50"})


def plan_of(tool: str, arguments: dict[str, JsonValue]) -> ToolPlan:
    return ToolPlan(nodes=(PlanNode(id="call", tool=tool, arguments=arguments),))


async def measure(per_client: int) -> tuple[float, float, list[str]]:
    """Seconds ``b`` waited, seconds ``a``'s calls took, and how ``a``'s calls ended."""
    executor = ToolExecutor(Executor(max_per_client=per_client))
    tools = {tool.name: tool for tool in builtin_tools()}
    started = 0
    holding = asyncio.Event()

    def observe(record: CallRecord) -> None:
        nonlocal started
        if record.outcome is None:
            started += 1
            if started == min(per_client, executor.settings.max_per_host):
                holding.set()

    try:
        await executor.sandbox.start()
        began = time.perf_counter()
        heavy = [
            asyncio.create_task(executor.execute(plan_of(*c), tools, None, observe, client="a"))
            for c in EXPENSIVE
        ]
        await holding.wait()
        asked = time.perf_counter()
        cheap = await executor.execute(plan_of(*CHEAP), tools, None, client="b")
        waited = time.perf_counter() - asked
        assert cheap.run.ok, cheap.run.unfinished()
        runs = [done.run for done in await asyncio.gather(*heavy)]
        heavy_seconds = time.perf_counter() - began
    finally:
        await executor.aclose()
    return waited, heavy_seconds, [str(r.records["call"].outcome) for r in runs]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-client", type=int, nargs="+", default=[4, 2])
    for per_client in parser.parse_args().per_client:
        waited, heavy, outcomes = asyncio.run(measure(per_client))
        counts = {o: outcomes.count(o) for o in sorted(set(outcomes))}
        print(
            f"max_per_client={per_client}: 2*pi*50 of client b answered in {waited:.2f} s; "
            f"client a's 12 calls took {heavy:.1f} s ({counts})"
        )


if __name__ == "__main__":
    main()
