"""The scheduler against the best it could do: wall time vs the DAG's critical path.

    python -m eval.bench_scheduler            # about a minute
    python -m eval.bench_scheduler --quick    # a few seconds

Synthetic plans of tools that sleep a known time run through
:class:`proxy.execute.scheduler.Scheduler` (limits set high enough not to bind),
through a level-by-level executor (start every call of a level, wait for all of
them: the thesis's way) and one call after another. The target is wall time ≤
1.05 x critical path + 5 ms. Scheduler overhead per call comes from plans of
tools that return at once (a wide one and a chain). Results: a table here,
``eval/results/bench_scheduler.json`` and ``eval/results/bench_scheduler.png``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import statistics
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

import uvloop
from matplotlib.figure import Figure
from pydantic import JsonValue

from proxy.config import ExecutorSettings
from proxy.execute.plan import PlanNode, ToolPlan
from proxy.execute.scheduler import Scheduler

RESULTS = Path(__file__).resolve().parent / "results"
LIMITS = ExecutorSettings(
    max_concurrency=10_000,
    max_per_host=10_000,
    max_per_client=10_000,
    call_timeout=60,
    deadline=600,
)


@dataclass(frozen=True)
class Shape:
    name: str
    plan: ToolPlan
    durations: dict[str, float]


@dataclass
class Row:
    shape: str
    calls: int
    critical_ms: float
    toolgraph_ms: float
    levels_ms: float
    sequential_ms: float
    target_ms: float

    @property
    def met(self) -> bool:
        return self.toolgraph_ms <= self.target_ms


class Sleeper:
    """Tools that sleep their node's duration."""

    def __init__(self, durations: Mapping[str, float]) -> None:
        self.durations = durations

    def host(self, node: PlanNode) -> str:
        return "bench"

    async def run(
        self, node: PlanNode, arguments: dict[str, JsonValue], context: Mapping[str, JsonValue]
    ) -> JsonValue:
        duration = self.durations[node.id]
        if duration:
            await asyncio.sleep(duration)
        return node.id


def shapes(seed: int = 7) -> list[Shape]:
    rng = random.Random(seed)
    built = [
        _chain(10, 0.02),
        _fan("fan-out 50 x 50 ms", 50, 0.05),
        _diamond(20, 0.03),
        _unbalanced(),
    ]
    for i in range(3):
        built.append(_random_dag(f"random DAG #{i + 1} (40 calls)", 40, rng))
    return built


def _plan(edges: Mapping[str, tuple[str, ...]]) -> ToolPlan:
    return ToolPlan(
        nodes=tuple(PlanNode(id=i, tool=f"sleep_{i}", needs=needs) for i, needs in edges.items())
    )


def _chain(n: int, seconds: float) -> Shape:
    edges = {f"c{i}": ((f"c{i - 1}",) if i else ()) for i in range(n)}
    return Shape(f"chain {n} x {seconds * 1000:g} ms", _plan(edges), dict.fromkeys(edges, seconds))


def _fan(name: str, n: int, seconds: float) -> Shape:
    edges: dict[str, tuple[str, ...]] = {f"f{i}": () for i in range(n)}
    return Shape(name, _plan(edges), dict.fromkeys(edges, seconds))


def _diamond(width: int, seconds: float) -> Shape:
    middle = tuple(f"m{i}" for i in range(width))
    edges: dict[str, tuple[str, ...]] = {"root": (), **dict.fromkeys(middle, ("root",))}
    edges["join"] = middle
    return Shape(f"diamond 1-{width}-1 x 30 ms", _plan(edges), dict.fromkeys(edges, seconds))


def _unbalanced() -> Shape:
    # Two chains whose slow steps sit on different levels: levels cost 100 + 100.
    edges: dict[str, tuple[str, ...]] = {"a1": (), "a2": ("a1",), "b1": (), "b2": ("b1",)}
    durations = {"a1": 0.01, "a2": 0.1, "b1": 0.1, "b2": 0.01}
    return Shape("two chains 10+100 / 100+10 ms", _plan(edges), durations)


def _random_dag(name: str, n: int, rng: random.Random) -> Shape:
    edges: dict[str, tuple[str, ...]] = {}
    for i in range(n):
        earlier = [f"r{j}" for j in range(max(0, i - 8), i)]
        count = rng.choice([0, 1, 1, 2, 3]) if earlier else 0
        edges[f"r{i}"] = tuple(rng.sample(earlier, min(count, len(earlier))))
    durations = {node: rng.uniform(0.005, 0.1) for node in edges}
    return Shape(name, _plan(edges), durations)


async def run_scheduler(shape: Shape) -> float:
    started = time.perf_counter()
    run = await Scheduler(LIMITS).execute(shape.plan, Sleeper(shape.durations))
    assert run.ok
    return time.perf_counter() - started


async def run_levels(shape: Shape) -> float:
    """Level-by-level: each level starts when the whole previous level has finished."""
    sleeper = Sleeper(shape.durations)
    level: dict[str, int] = {}
    for node in shape.plan.topological_order():
        level[node.id] = 1 + max((level[d] for d in node.dependencies), default=-1)
    started = time.perf_counter()
    for depth in range(max(level.values()) + 1):
        batch = [n for n in shape.plan.nodes if level[n.id] == depth]
        await asyncio.gather(*(sleeper.run(n, {}, {}) for n in batch))
    return time.perf_counter() - started


async def run_sequential(shape: Shape) -> float:
    sleeper = Sleeper(shape.durations)
    started = time.perf_counter()
    for node in shape.plan.topological_order():
        await sleeper.run(node, {}, {})
    return time.perf_counter() - started


async def median_ms(
    runner: Callable[[Shape], Awaitable[float]], shape: Shape, repeats: int
) -> float:
    await runner(shape)  # warm-up: first-time costs (metric children, imports) are not the point
    times = [await runner(shape) for _ in range(repeats)]
    return statistics.median(times) * 1000


async def measure(shape: Shape, repeats: int) -> Row:
    critical = shape.plan.critical_path(shape.durations) * 1000
    return Row(
        shape=shape.name,
        calls=len(shape.plan.nodes),
        critical_ms=critical,
        toolgraph_ms=await median_ms(run_scheduler, shape, repeats),
        levels_ms=await median_ms(run_levels, shape, repeats),
        sequential_ms=await median_ms(run_sequential, shape, max(1, repeats // 3)),
        target_ms=1.05 * critical + 5,
    )


async def overhead_us(calls: int, chain: bool, repeats: int) -> float:
    """Scheduler time per call for tools that return at once, in microseconds."""
    edges = {f"n{i}": ((f"n{i - 1}",) if chain and i else ()) for i in range(calls)}
    shape = Shape("overhead", _plan(edges), dict.fromkeys(edges, 0.0))
    return await median_ms(run_scheduler, shape, repeats) / calls * 1000


def table(rows: list[Row], overhead: dict[str, float]) -> str:
    head = (
        f"{'plan':<32} {'calls':>5} {'critical':>9} {'toolgraph':>10} {'x crit':>7} "
        f"{'levels':>8} {'one by one':>11} {'target':>7}"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r.shape:<32} {r.calls:>5} {r.critical_ms:>7.1f}ms {r.toolgraph_ms:>8.1f}ms "
            f"{r.toolgraph_ms / r.critical_ms:>6.3f}x {r.levels_ms:>6.1f}ms "
            f"{r.sequential_ms:>9.1f}ms {'met' if r.met else 'MISSED':>7}"
        )
    lines.append("")
    lines += [f"scheduler overhead per call, {name}: {us:.1f} µs" for name, us in overhead.items()]
    return "\n".join(lines)


def plot(rows: list[Row], path: Path) -> None:
    figure = Figure(figsize=(11, 5))
    axes = figure.subplots()
    width = 0.2
    xs = range(len(rows))
    series = [
        ("critical path", [r.critical_ms for r in rows]),
        ("toolgraph (ready-queue)", [r.toolgraph_ms for r in rows]),
        ("level by level", [r.levels_ms for r in rows]),
        ("one by one", [r.sequential_ms for r in rows]),
    ]
    for i, (label, values) in enumerate(series):
        axes.bar([x + (i - 1.5) * width for x in xs], values, width, label=label)
    axes.set_xticks(list(xs), [r.shape for r in rows], rotation=20, ha="right", fontsize=8)
    axes.set_ylabel("wall time (ms, median)")
    axes.set_yscale("log")
    axes.set_title("Tool DAGs of sleeping tools: wall time against the critical path")
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)


async def bench(quick: bool) -> dict[str, object]:
    repeats = 3 if quick else 9
    rows = [await measure(shape, repeats) for shape in shapes()]
    overhead = {
        "2000 independent calls": await overhead_us(2000, chain=False, repeats=repeats),
        "chain of 1000 calls": await overhead_us(1000, chain=True, repeats=repeats),
    }
    print(table(rows, overhead))
    print(f"load average (1 min) at the end: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    RESULTS.mkdir(parents=True, exist_ok=True)
    result: dict[str, object] = {
        "machine": f"{platform.machine()} {platform.system()}, Python {platform.python_version()}",
        "repeats": repeats,
        "load_average_1m": round(os.getloadavg()[0], 2),
        "rows": [asdict(r) | {"met": r.met} for r in rows],
        "overhead_us_per_call": overhead,
    }
    (RESULTS / "bench_scheduler.json").write_text(json.dumps(result, indent=2) + "\n")
    plot(rows, RESULTS / "bench_scheduler.png")
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 repetitions instead of 9")
    args = parser.parse_args(argv)
    result = uvloop.run(bench(args.quick))
    rows = result["rows"]
    assert isinstance(rows, list)
    return 0 if all(row["met"] for row in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
