"""Load that must hold: orchestrate under 200 concurrent requests, a Redis outage, memory.

    python -m eval.bench_load [--quick] [--concurrency 200] [--seconds 60] ...

Each scenario runs against a fresh ``toolgraph serve`` (a process of its own, one
worker, so the RSS read from /proc is the proxy's own) with a fresh data dir,
driven by the keep-alive client of the overhead benchmark, one connection per
concurrent request:

* A: orchestrate requests (non-streamed) with a Redis of the benchmark's own, each
  with a distinct text (``Please compute 2*pi*{i}``), so plan memory and retrieval
  see distinct queries; the fake upstream's :class:`~testing.brain.Brain` answers
  every planner prompt (a one-step plan, ``evaluate_expression``); every other
  request carries an ``Idempotency-Key``. Target: no 5xx.
* B: the same, with Redis killed (SIGKILL) for ``--outage-seconds`` in the middle
  and started again on the same port. Target: no request whose answer the model
  had already written ends in an error, and no 500 (a clean, retryable 503 while
  Redis is down is allowed).
* C: passthrough streams against the fake upstream (a process of its own), until
  ``--passthrough-requests`` (capped at ``--passthrough-max-seconds``); the proxy's
  RSS read after half of them and after all. Target: the second within 10 % of the
  first.
* D: two tenants (virtual keys) with Redis (:mod:`eval._load_tenants`): a benign one
  (``--benign-concurrency``, one request in eight keyed) alone for half of
  ``--seconds``, then for ``--seconds`` beside a hostile one
  (``--hostile-concurrency``, every other request a CPU-heavy sandboxed expression,
  the rest answered without a tool, each with a fresh ``Idempotency-Key``).
  Target: no error for the benign tenant; the hostile one refused by its own key
  share (429).

Results: a table here, ``bench_load.json``, ``bench_load.md`` and
``bench_load.png`` in ``--out`` (default ``eval/results``).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from eval import _load_tenants as tenants
from eval._bench_client import Endpoint
from eval._bench_services import (
    MODEL,
    Service,
    ServiceError,
    fake_upstream_spec,
    running,
    toolgraph_spec,
    wait_ready,
)
from eval._load_client import Load
from eval._load_report import orchestrate_summary, passthrough_summary, write_results
from testing.brain import Brain, plan_of
from testing.fake_upstream import FakeUpstream, Script
from testing.ports import free_port

ROOT = Path(__file__).resolve().parent.parent
MASTER_KEY = "tg-load-master-key-0123456789"
TEXT = "Please compute 2*pi*{index}"
INDEX = re.compile(r"Please compute 2\*pi\*(\d+)")


@dataclass(frozen=True)
class Sizes:
    """How much load: the issue's figures by default, a few seconds with ``--quick``."""

    concurrency: int = 200
    seconds: float = 60.0
    outage_seconds: float = 10.0
    passthrough_requests: int = 40_000
    passthrough_max_seconds: float = 900.0
    timeout: float = 120.0
    benign_concurrency: int = 4
    hostile_concurrency: int = 32


QUICK = Sizes(
    concurrency=8, seconds=4, outage_seconds=1, passthrough_requests=400, timeout=60,
    benign_concurrency=2, hostile_concurrency=4,
)  # fmt: skip


@dataclass
class LoadBrain(Brain):
    """The Brain for distinct requests: plan and arguments read from the request's text.

    ``answered`` holds the index of every request whose final answer the model was
    asked for: its pipeline ran to the end, so an error after it is an answer lost.
    """

    answered: set[int] = field(default_factory=set)

    def decomposition(self, conversation: str) -> dict[str, Any] | None:
        index = _index(conversation)
        return None if index is None else plan_of((TEXT.format(index=index), []))

    def arguments_for(self, task: str) -> Any:
        index = _index(task)
        return super().arguments_for(task) if index is None else {"expression": f"2*pi*{index}"}

    def answer(self, request: dict[str, Any], system: str) -> Script:
        users = [m for m in request.get("messages") or [] if m.get("role") == "user"]
        index = _index(str(users[-1].get("content") or "")) if users else None
        if index is not None:
            self.answered.add(index)
        return super().answer(request, system)


def _index(text: str) -> int | None:
    found = INDEX.search(text)
    return int(found.group(1)) if found else None


def orchestrate_body(index: int) -> bytes:
    return orjson.dumps(
        {
            "model": MODEL,
            "messages": [{"role": "user", "content": TEXT.format(index=index)}],
            "toolgraph": {"mode": "orchestrate"},
        }
    )


def every_other_keyed(index: int) -> dict[str, str]:
    """An ``Idempotency-Key`` on every other request, so the key store is under load too."""
    return {"idempotency-key": f"load-{os.getpid()}-{index}"} if index % 2 == 0 else {}


STREAM_BODY = orjson.dumps(
    {"model": MODEL, "messages": [{"role": "user", "content": "Say hello."}], "stream": True}
)


class RedisServer:
    """A redis-server of the benchmark's own on a free port (never the machine's 6379),
    which can be killed and started again on the same port."""

    def __init__(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise ServiceError("redis-server is not installed (apt-get install redis-server)")
        self.port = free_port()
        self._argv = [binary, "--port", str(self.port), "--bind", "127.0.0.1"]
        self._argv += ["--save", "", "--appendonly", "no"]
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self._process = subprocess.Popen(
            self._argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                if self._process.poll() is not None or time.monotonic() > deadline:
                    raise ServiceError(f"redis-server did not start on port {self.port}") from None
                time.sleep(0.05)

    def kill(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process.wait(10)

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            self._process.wait(10)


@contextmanager
def redis_server() -> Iterator[RedisServer]:
    redis = RedisServer()
    redis.start()
    try:
        yield redis
    finally:
        redis.stop()


@contextmanager
def toolgraph(
    work: Path, upstream_port: int, redis_url: str | None, env: dict[str, str] | None = None
) -> Iterator[Service]:
    """A ready ``toolgraph serve``, its catalog loaded at start-up (no cold first request);
    ``env``: more of its settings."""
    spec = toolgraph_spec(free_port(), upstream_port, MASTER_KEY, work / "data")
    # The checkout this script runs from is the one measured, whatever the venv installed.
    extra = {"TOOLGRAPH_ORCHESTRATE__PRELOAD": "true", "PYTHONPATH": str(ROOT), **(env or {})}
    if redis_url is not None:
        extra["TOOLGRAPH_REDIS_URL"] = redis_url
    # Ready once the catalog is loaded: /readyz, not /healthz.
    spec = dataclasses.replace(spec, env=spec.env | extra, health_path="/readyz", ready_timeout=600)
    with running(spec, os.environ, work) as service:
        wait_ready(service)
        yield service


EXCEPTION_LINE = re.compile(r"^[ |]*([A-Za-z_][\w.]*(?:Error|Exception|Exit))(?::|$)")


def logged_errors(service: Service, most: int = 8) -> dict[str, int]:
    """The exceptions the proxy's log names (the last line of each traceback), by count."""
    lines = service.log_path.read_text(encoding="utf-8", errors="replace").splitlines()
    found = Counter(line.lstrip(" |")[:160] for line in lines if EXCEPTION_LINE.match(line))
    return dict(found.most_common(most))


def rss_mib(pid: int) -> float:
    """The resident set of process ``pid`` (Linux /proc), MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise ServiceError(f"no VmRSS for process {pid}")


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time process ``pid`` has used (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class CpuShare:
    """Per tick: how much of a core the proxy and this process (client and fake
    upstream) used, to tell which of them a slow stretch waited on."""

    pid: int
    samples: list[tuple[float, float, float]] = field(default_factory=list)
    _last: tuple[float, float, float] | None = None

    def sample(self, elapsed: float) -> None:
        now = (elapsed, cpu_seconds(self.pid), time.process_time())
        if self._last is not None and now[0] > self._last[0]:
            span = now[0] - self._last[0]
            proxy, own = (now[1] - self._last[1]) / span, (now[2] - self._last[2]) / span
            self.samples.append((round(now[0], 1), round(proxy, 2), round(own, 2)))
        self._last = now


def new_load(
    service: Service, body_for: Callable[[int], bytes], stream: bool, sizes: Sizes
) -> Load:
    return Load(
        endpoint=Endpoint("127.0.0.1", service.spec.port),
        body_for=body_for,
        headers={"authorization": f"Bearer {MASTER_KEY}"},
        concurrency=sizes.concurrency,
        stream=stream,
        timeout=sizes.timeout,
    )


async def watched(
    load: Load,
    work: Awaitable[None],
    label: str,
    total: float,
    by_requests: bool,
    on_tick: Callable[[], None] = lambda: None,
) -> None:
    """Await ``work`` with a progress bar (seconds, or requests answered) read every 0.5 s."""
    columns = (TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn())
    with Progress(*columns, transient=False) as progress:
        task = progress.add_task(label, total=total)

        async def tick() -> None:
            while True:
                done = len(load.outcomes)
                failed = sum(1 for o in load.outcomes if not o.complete)
                shown = done if by_requests else min(load.elapsed, total)
                progress.update(
                    task, completed=shown, description=f"{label}: {done} done, {failed} errors"
                )
                on_tick()
                await asyncio.sleep(0.5)

        ticker = asyncio.create_task(tick())
        try:
            await work
        finally:
            ticker.cancel()


def scenario_orchestrate(work: Path, sizes: Sizes, outage: bool) -> dict[str, Any]:
    """Scenario A (``outage=False``) or B: orchestrate load, Redis killed in B."""
    brain = LoadBrain(tools={"Please compute": "evaluate_expression"}, remember=False)
    upstream = FakeUpstream(record=False).start()
    upstream.responder = brain
    marks: dict[str, float] = {}
    load_before = os.getloadavg()[0]
    try:
        with redis_server() as redis, toolgraph(work, upstream.port, redis.url) as proxy:
            load = new_load(proxy, orchestrate_body, stream=False, sizes=sizes)
            load.headers_for = every_other_keyed
            cpu = CpuShare(proxy.process.pid)

            async def kill_redis() -> None:
                await asyncio.sleep(max(0.0, (sizes.seconds - sizes.outage_seconds) / 2))
                redis.kill()
                marks["redis_killed_s"] = load.elapsed
                await asyncio.sleep(sizes.outage_seconds)
                await asyncio.to_thread(redis.start)
                marks["redis_back_s"] = load.elapsed

            async def drive() -> None:
                async with asyncio.TaskGroup() as group:
                    group.create_task(load.run(sizes.seconds))
                    if outage:
                        group.create_task(kill_redis())

            label = "B: orchestrate, Redis killed" if outage else "A: orchestrate"

            def tick() -> None:
                cpu.sample(load.elapsed)

            asyncio.run(watched(load, drive(), label, sizes.seconds, False, tick))
            alive = proxy.process.poll() is None
            logged = logged_errors(proxy)
    finally:
        upstream.stop()
    summary = orchestrate_summary(load, brain.answered, marks)
    summary["proxy_alive_after"] = alive
    summary["proxy_logged_errors"] = logged
    summary["cpu_cores_used"] = {
        "columns": ["second", "proxy (main process)", "client and fake upstream"],
        "rows": cpu.samples,
    }
    summary["model_prompts"] = dict(brain.asked)  # arguments > 0: the tool was picked and run
    summary["load_average"] = {"before": load_before, "after": os.getloadavg()[0]}
    return summary


def scenario_passthrough(work: Path, sizes: Sizes) -> dict[str, Any]:
    """Scenario C: passthrough streams; the proxy's RSS after half and all of the requests."""
    upstream_spec = fake_upstream_spec(free_port(), 0, ROOT)
    load_before = os.getloadavg()[0]
    with running(upstream_spec, os.environ, work) as upstream:
        wait_ready(upstream)
        with toolgraph(work, upstream_spec.port, None) as proxy:
            load = new_load(proxy, lambda _: STREAM_BODY, stream=True, sizes=sizes)
            pid = proxy.process.pid
            rss: dict[str, Any] = {"start_mib": rss_mib(pid), "samples": []}

            def sample() -> None:
                rss["samples"].append((len(load.outcomes), round(rss_mib(pid), 1)))

            async def drive() -> None:
                half = sizes.passthrough_requests // 2
                for name in ("first_half", "second_half"):
                    left = sizes.passthrough_max_seconds - load.elapsed
                    await load.run(max(left, 0.0), requests=half)
                    rss[f"after_{name}"] = {"requests": len(load.outcomes), "mib": rss_mib(pid)}

            label = "C: passthrough streams"
            total = sizes.passthrough_requests
            asyncio.run(watched(load, drive(), label, total, by_requests=True, on_tick=sample))
    summary = passthrough_summary(load, rss, sizes.passthrough_requests)
    summary["load_average"] = {"before": load_before, "after": os.getloadavg()[0]}
    return summary


def scenario_tenants(work: Path, sizes: Sizes) -> dict[str, Any]:
    """Scenario D: a benign tenant alone, then beside a hostile one (eval._load_tenants)."""
    brain = tenants.brain()
    upstream = FakeUpstream(record=False).start()
    upstream.responder = brain
    load_before = os.getloadavg()[0]
    env = {
        "TOOLGRAPH_ADMIN_KEY": tenants.ADMIN_KEY,
        "TOOLGRAPH_ORCHESTRATE__TENANT_IDEMPOTENCY_BYTES": str(tenants.TENANT_IDEMPOTENCY_BYTES),
    }
    try:
        with redis_server() as redis, toolgraph(work, upstream.port, redis.url, env) as proxy:
            port, tag = proxy.spec.port, f"load-{os.getpid()}"
            keys = {name: tenants.create_key(port, name) for name in ("benign", "hostile")}
            benign = tenants.tenant_load(
                port, keys["benign"], tenants.BENIGN, MODEL,
                (sizes.benign_concurrency, sizes.timeout), f"{tag}-benign", tenants.benign_keyed,
            )  # fmt: skip
            hostile = tenants.tenant_load(
                port, keys["hostile"], tenants.HOSTILE, MODEL,
                (sizes.hostile_concurrency, sizes.timeout), f"{tag}-hostile",
                tenants.hostile_keyed,
            )  # fmt: skip
            alone = 0

            async def drive() -> None:
                nonlocal alone
                await benign.run(sizes.seconds / 2)
                alone = len(benign.outcomes)
                async with asyncio.TaskGroup() as group:
                    group.create_task(benign.run(sizes.seconds))
                    group.create_task(hostile.run(sizes.seconds))

            total = sizes.seconds * 1.5
            asyncio.run(watched(benign, drive(), "D: two tenants (benign)", total, False))
            rss = rss_mib(proxy.process.pid)
            logged = logged_errors(proxy)
    finally:
        upstream.stop()
    summary = tenants.tenants_summary(benign, alone, hostile)
    summary["proxy_rss_mib_after"] = round(rss, 1)
    summary["proxy_logged_errors"] = logged
    summary["load_average"] = {"before": load_before, "after": os.getloadavg()[0]}
    return summary


def parse_args() -> tuple[Sizes, set[str], Path, bool]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    full = Sizes()
    parser.add_argument("--quick", action="store_true", help="a smoke run of a few seconds each")
    parser.add_argument("--scenarios", default="abcd", help="which to run (default: abcd)")
    parser.add_argument(
        "--out",
        type=Path,
        default=ROOT / "eval" / "results",
        help="where the JSON, markdown and plot go (default eval/results)",
    )
    for name, value in dataclasses.asdict(full).items():
        flag = "--" + name.replace("_", "-")
        shown = f"default {value}, with --quick {getattr(QUICK, name)}"
        parser.add_argument(flag, type=type(value), help=shown)
    args = parser.parse_args()
    base = QUICK if args.quick else full
    given = {k: getattr(args, k) for k in dataclasses.asdict(full) if getattr(args, k) is not None}
    scenarios = set(args.scenarios.lower())
    if not scenarios or not scenarios <= {"a", "b", "c", "d"}:
        parser.error(f"--scenarios takes letters of 'abcd', not {args.scenarios!r}")
    return dataclasses.replace(base, **given), scenarios, args.out, args.quick


def main() -> None:
    sizes, scenarios, out, quick = parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    console = Console(width=None if sys.stdout.isatty() else 150)
    results: dict[str, Any] = {"sizes": dataclasses.asdict(sizes), "quick": quick}
    runs: dict[str, Callable[[Path], dict[str, Any]]] = {
        "a": lambda work: scenario_orchestrate(work, sizes, outage=False),
        "b": lambda work: scenario_orchestrate(work, sizes, outage=True),
        "c": lambda work: scenario_passthrough(work, sizes),
        "d": lambda work: scenario_tenants(work, sizes),
    }
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    try:
        for letter in sorted(scenarios):
            with tempfile.TemporaryDirectory(prefix=f"toolgraph-load-{letter}-") as folder:
                results[letter] = runs[letter](Path(folder))
    except ServiceError as exc:
        console.print(f"[red]{exc.message}[/red]\n{exc.detail}")
        raise SystemExit(1) from None
    results["machine"] = {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "started": started,
        "load_average_end": os.getloadavg(),
    }
    write_results(results, out, console)
    for check in results["checks"]:
        console.print(f"{check['status']:>4}  {check['target']}: {check['measured']}")


if __name__ == "__main__":
    main()
