"""How much latency toolgraph adds, against the upstream directly and LiteLLM's proxy,
on chat completions and on the Responses API (translated and relayed).

    python -m eval.bench_overhead            # the full run, about 10 minutes
    python -m eval.bench_overhead --quick    # a smoke run of about a minute
    python -m eval.bench_overhead --baseline REF --no-litellm --no-responses --label NAME
                                             # this tree against commit REF, same run

One fake OpenAI upstream (``python -m testing.fake_upstream --responses``, which keeps no
log of requests when run from the command line and also speaks the Responses API)
answers every request after a fixed 20 ms. The same small chat request (a system and
a user message) goes to it three ways: directly, through toolgraph (one worker,
relaying) and through LiteLLM's proxy (one worker, pass-through, installed in
``.bench/litellm-venv`` on first use). The same question as a Responses API request
(``instructions`` and ``input``) goes to it three more: to its own ``/v1/responses``
directly, through a second toolgraph worker set to ``upstream_responses=translate``
(the request becomes a chat completion, the answer a response: ``responses
translated``) and through the first, set to ``native`` (bytes relayed to the
upstream's ``/v1/responses``: ``responses relayed``). Every target at 1, 16 and 64
concurrent requests, streamed and not. Each cell warms up, then measures a fixed
number of requests or for a bounded time, whichever ends first. Added latency is a
proxy's p50 or p99 minus the direct path's at the same concurrency and mode, the
direct path being the API the proxy reaches the upstream by: its chat completions for
chat and translated Responses, its own ``/v1/responses`` for relayed ones (the fake
builds those with toolgraph's translation, so they cost it more than chat).

Why 20 ms: long enough that the upstream's own timer jitter is small beside it,
short enough that a cell at concurrency 1 takes seconds, and at concurrency 64 the
direct path could answer 3,200 requests/s, so a single proxy worker, not the
upstream, is what limits requests/s there.

The load generator is a minimal asyncio HTTP/1.1 keep-alive client, the same
against every target, so its own cost cancels out. Both proxies check a master
key, write no line per request (toolgraph at log level warning, LiteLLM at ERROR)
and use no database; toolgraph keeps the Responses it translates in its in-process
store (the client sends no ``store``, so OpenAI's default, true), within
``responses.max_stored``. Results: a table here, ``eval/results/bench_overhead.json``
and ``eval/results/bench_overhead.png``; server logs in ``.bench/logs``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import datetime
import os
import platform
import secrets
import signal
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any

import orjson
import uvloop
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from eval import _bench_report as report
from eval import _bench_services as services
from eval._bench_client import Cell, Endpoint, build_request
from eval._bench_report import CellKey, Summary
from testing.ports import free_port

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "eval" / "results"
WORK = ROOT / ".bench"
CONCURRENCY = (1, 16, 64)
MESSAGES = [
    {
        "role": "system",
        "content": "You are a concise assistant for a travel booking site. Answer in one sentence.",
    },
    {"role": "user", "content": "Which terminal does the morning flight from Paris to Oslo use?"},
]
INSTRUCTIONS, QUESTION = (message["content"] for message in MESSAGES)
CHAT_PATH, RESPONSES_PATH = "/v1/chat/completions", "/v1/responses"
#: each server's label in the report, and the targets it serves: (target, path)
SERVES = {
    "fake upstream": ("direct", [("direct", CHAT_PATH), ("direct responses", RESPONSES_PATH)]),
    "toolgraph": ("toolgraph", [("toolgraph", CHAT_PATH), ("responses relayed", RESPONSES_PATH)]),
    "toolgraph-translate": ("toolgraph translate", [("responses translated", RESPONSES_PATH)]),
    "baseline": ("baseline", [("baseline", CHAT_PATH)]),
    "litellm": ("litellm", [("litellm", CHAT_PATH)]),
}
RESPONSES_TARGETS = ("responses translated", "direct responses", "responses relayed")
CLIENT = (
    "eval._bench_client: asyncio on uvloop, HTTP/1.1 keep-alive, one connection per "
    "concurrent request, TCP_NODELAY; latency to the last byte, ttfb to the first body chunk"
)
NOTES = [
    "one worker per proxy; toolgraph at TOOLGRAPH_LOG_LEVEL=warning and LiteLLM at "
    "LITELLM_LOG=ERROR, so neither writes a log line per request",
    "added latency = the proxy's percentile minus the direct path's, same concurrency and mode",
    "req/s are compared at the highest concurrency, where one worker is CPU-bound",
    "responses translated: toolgraph at upstream_responses=translate, against the upstream's "
    "chat completions; responses relayed: toolgraph at native, against the upstream's own "
    "/v1/responses",
]


@dataclasses.dataclass(frozen=True)
class Plan:
    delay_ms: float
    requests: int
    warmup: int
    max_seconds: float
    with_litellm: bool
    quick: bool
    with_responses: bool = True
    baseline: str | None = None
    label: str | None = None
    concurrency: tuple[int, ...] = CONCURRENCY


@dataclasses.dataclass
class Setup:
    """The servers of one run: where to reach them and how they were started."""

    master_key: str
    described: dict[str, dict[str, Any]]
    endpoints: dict[str, Endpoint] = dataclasses.field(default_factory=dict)
    pids: dict[str, int] = dataclasses.field(default_factory=dict)
    litellm_missing: str | None = None


def main(argv: list[str] | None = None) -> int:
    plan = _plan(_parser().parse_args(argv))
    # A pipe or a CI log gets a fixed width rather than rich's 80 columns.
    console = Console() if sys.stdout.isatty() else Console(width=150)
    started = _now()
    # `kill` and `timeout` stop the run the way Ctrl-C does: servers first.
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        with contextlib.ExitStack() as stack:
            setup = start_servers(plan, stack, console)
            cells = measure(plan, setup, console)
    except services.ServiceError as exc:
        console.print(f"[bold red]benchmark aborted:[/bold red] {escape(exc.message)}")
        console.print(exc.detail, style="dim", markup=False, highlight=False)
        return 1
    except KeyboardInterrupt:
        console.print("[yellow]interrupted; the servers were stopped[/yellow]")
        return 130
    write_report(plan, setup, cells, started, console)
    return 0


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m eval.bench_overhead",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--quick", action="store_true", help="a smoke run of about a minute")
    parser.add_argument("--requests", type=int, help="measured requests per cell (1500)")
    parser.add_argument(
        "--warmup", type=int, help="unmeasured requests first, at least 2 per connection (100)"
    )
    parser.add_argument("--max-seconds", type=float, help="cap on each phase of a cell (45)")
    parser.add_argument("--delay-ms", type=float, default=20.0, help="the upstream's delay (20)")
    parser.add_argument("--no-litellm", action="store_true", help="toolgraph and direct only")
    parser.add_argument(
        "--no-responses", action="store_true", help="chat completions only, no /v1/responses"
    )
    parser.add_argument(
        "--baseline",
        metavar="REF",
        help="also measure toolgraph at git commit REF (checked out in .bench/baseline), "
        "interleaved with this tree in the same run",
    )
    parser.add_argument(
        "--concurrency",
        type=lambda text: tuple(int(c) for c in text.split(",")),
        help="concurrency levels, comma-separated (1,16,64)",
    )
    parser.add_argument(
        "--label", help="write eval/results/bench_overhead_LABEL.{json,png} instead of the default"
    )
    return parser


def _plan(args: argparse.Namespace) -> Plan:
    requests, warmup, max_seconds = (150, 10, 5.0) if args.quick else (1500, 100, 45.0)
    return Plan(
        delay_ms=args.delay_ms,
        requests=args.requests or requests,
        warmup=warmup if args.warmup is None else args.warmup,
        max_seconds=args.max_seconds or max_seconds,
        with_litellm=not args.no_litellm,
        quick=args.quick,
        with_responses=not args.no_responses,
        baseline=args.baseline,
        label=args.label,
        concurrency=args.concurrency or CONCURRENCY,
    )


def start_servers(plan: Plan, stack: contextlib.ExitStack, console: Console) -> Setup:
    """Start every server (stopped when ``stack`` closes) and wait until each is ready."""
    toolgraph = {"version": version("toolgraph"), "commit": _commit(), "workers": 1}
    setup = Setup(
        master_key="sk-" + secrets.token_hex(32),
        described={
            "direct": {"upstream_delay_ms": plan.delay_ms},
            "toolgraph": dict(toolgraph),
            "litellm": {"version": services.LITELLM_VERSION, "workers": 1},
        },
    )
    fake_port = free_port()
    specs = _toolgraph_specs(plan, setup, fake_port)
    if plan.baseline is not None:
        source = WORK / "baseline"
        commit = services.baseline_checkout(ROOT, plan.baseline, source)
        setup.described["baseline"] = {"ref": plan.baseline, "commit": commit, "workers": 1}
        specs.append(
            services.baseline_spec(
                free_port(), fake_port, setup.master_key, WORK / "baseline-data", source
            )
        )
    litellm = _litellm_spec(plan, setup, fake_port, console)
    if litellm is not None:
        specs.append(litellm)
    running = [stack.enter_context(services.running(s, os.environ, WORK)) for s in specs]
    with console.status("waiting for the servers to be ready"):
        for service in running:
            try:
                services.wait_ready(service)
            except services.ServiceError as exc:
                if service.spec.name != "litellm":
                    raise
                _without_litellm(setup, console, "its proxy did not start", exc)
                continue
            _serve(plan, setup, service)
    return setup


def _toolgraph_specs(plan: Plan, setup: Setup, fake_port: int) -> list[services.ServerSpec]:
    """The fake upstream and toolgraph (chat, relayed Responses), and with Responses a
    second toolgraph that translates them."""
    fake = services.fake_upstream_spec(fake_port, plan.delay_ms, ROOT)
    toolgraph = services.toolgraph_spec(
        free_port(), fake_port, setup.master_key, WORK / "toolgraph-data"
    )
    if not plan.with_responses:
        return [fake, toolgraph]
    setup.described["toolgraph translate"] = dict(setup.described["toolgraph"])
    translate = services.toolgraph_spec(
        free_port(), fake_port, setup.master_key, WORK / "toolgraph-translate-data"
    )
    return [
        dataclasses.replace(fake, argv=[*fake.argv, "--responses"]),
        _responses(toolgraph, "native", "toolgraph"),
        _responses(translate, "translate", "toolgraph-translate"),
    ]


def _responses(spec: services.ServerSpec, support: str, name: str) -> services.ServerSpec:
    env = spec.env | {"TOOLGRAPH_UPSTREAM_RESPONSES": support}
    return dataclasses.replace(spec, name=name, env=env)


def _serve(plan: Plan, setup: Setup, service: services.Service) -> None:
    """Point the targets of a ready server at it."""
    label, targets = SERVES[service.spec.name]
    for target, path in targets:
        if target in RESPONSES_TARGETS and not plan.with_responses:
            continue
        setup.endpoints[target] = Endpoint("127.0.0.1", service.spec.port, path)
        setup.pids[target] = service.process.pid
    setup.described[label] |= service.spec.describe(setup.master_key)


def _litellm_spec(
    plan: Plan, setup: Setup, upstream_port: int, console: Console
) -> services.ServerSpec | None:
    config = services.litellm_config(upstream_port)
    setup.described["litellm"]["config"] = config
    if not plan.with_litellm:
        setup.litellm_missing = "skipped with --no-litellm"
        return None
    venv = WORK / "litellm-venv"
    wanted = escape(f"litellm[proxy]=={services.LITELLM_VERSION} in {venv}")
    with console.status(f"{wanted}: checking") as status:
        try:
            services.ensure_litellm_venv(
                venv, lambda line: status.update(f"{wanted}: {escape(line[:100])}")
            )
        except (services.ServiceError, OSError) as exc:
            _without_litellm(setup, console, "installing it failed", exc)
            return None
    config_path = services.write_litellm_config(config, WORK / "litellm-config.yaml")
    return services.litellm_spec(free_port(), venv, config_path, setup.master_key)


def _without_litellm(setup: Setup, console: Console, what: str, exc: Exception) -> None:
    """Go on without LiteLLM, saying why here, in the table and in the JSON."""
    message = exc.message if isinstance(exc, services.ServiceError) else str(exc)
    detail = exc.detail if isinstance(exc, services.ServiceError) else ""
    setup.litellm_missing = f"{what}: {message}"
    setup.described["litellm"]["failure_detail"] = detail
    console.print(f"[bold red]LiteLLM will NOT be measured: {what}[/bold red]: {escape(message)}")
    console.print(detail, style="dim", markup=False, highlight=False)


def request_body(stream: bool, path: str = CHAT_PATH) -> bytes:
    """The benchmark's request: a chat completion, or the same question to ``/v1/responses``."""
    if path == RESPONSES_PATH:
        return responses_body(stream)
    body: dict[str, Any] = {
        "model": services.MODEL,
        "messages": MESSAGES,
        "temperature": 0.2,
        "max_tokens": 128,
    }
    if stream:
        body |= {"stream": True, "stream_options": {"include_usage": True}}
    return orjson.dumps(body)


def responses_body(stream: bool) -> bytes:
    body: dict[str, Any] = {
        "model": services.MODEL,
        "instructions": INSTRUCTIONS,
        "input": QUESTION,
        "temperature": 0.2,
        "max_output_tokens": 128,
    }
    if stream:
        body["stream"] = True
    return orjson.dumps(body)


def measure(plan: Plan, setup: Setup, console: Console) -> dict[CellKey, Summary | None]:
    """Every cell, the targets interleaved so that drift on the machine hits each alike."""
    keys = [
        CellKey(concurrency, stream, target)
        for concurrency in plan.concurrency
        for stream in (False, True)
        for target in report.TARGETS
        if target != "baseline" or plan.baseline is not None
        if target not in RESPONSES_TARGETS or plan.with_responses
    ]
    cells: dict[CellKey, Summary | None] = {}
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn())
    with (
        Progress(*columns, TimeElapsedColumn(), console=console, refresh_per_second=4) as progress,
        asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner,
    ):
        overall = progress.add_task("cells", total=len(keys))
        for key in keys:
            endpoint = setup.endpoints.get(key.target)
            if endpoint is not None:
                cells[key] = runner.run(_measure_cell(plan, setup, key, endpoint, progress))
            else:
                cells[key] = None
            progress.advance(overall)
    return cells


async def _measure_cell(
    plan: Plan, setup: Setup, key: CellKey, endpoint: Endpoint, progress: Progress
) -> Summary | None:
    headers = {"authorization": f"Bearer {setup.master_key}"}
    request = build_request(endpoint, request_body(key.stream, endpoint.path), headers)
    cell = Cell(endpoint, request, key.concurrency, key.stream)
    warmup = max(plan.warmup, 2 * key.concurrency)  # every connection open and used
    label = f"{key.target} c={key.concurrency} {key.mode}"
    task = progress.add_task(label, total=warmup + plan.requests)
    ticker = asyncio.create_task(_tick(progress, task, cell))
    pid = setup.pids[key.target]
    cpu_before = services.process_cpu_seconds(pid)
    try:
        samples = await cell.run(warmup, plan.requests, plan.max_seconds)
    finally:
        ticker.cancel()
        progress.remove_task(task)
    cpu = services.process_cpu_seconds(pid) - cpu_before
    summary = report.summarize(samples)
    if summary is None or not cell.done:
        return summary
    return dataclasses.replace(summary, server_cpu_ms=1000 * cpu / cell.done)


async def _tick(progress: Progress, task: Any, cell: Cell) -> None:
    while True:
        progress.update(task, completed=cell.done)
        await asyncio.sleep(0.25)


def write_report(
    plan: Plan,
    setup: Setup,
    cells: dict[CellKey, Summary | None],
    started: str,
    console: Console,
) -> None:
    checks = report.check_targets(cells, low=plan.concurrency[0], high=plan.concurrency[-1])
    title = f"Overhead over a {plan.delay_ms:g} ms upstream, one worker per proxy"
    console.print(report.results_table(cells, title))
    console.print(report.checks_table(checks))
    notes = list(NOTES)
    if plan.quick:
        notes.insert(0, "--quick smoke run: too few requests for stable p99 figures")
    for note in notes:
        console.print(f"note: {note}", style="dim", markup=False, highlight=False)
    if setup.litellm_missing:
        notes.insert(0, f"LiteLLM NOT MEASURED: {setup.litellm_missing}")
        console.print(
            f"[bold red]LiteLLM was NOT measured[/bold red]: {escape(setup.litellm_missing)}"
        )
    RESULTS.mkdir(parents=True, exist_ok=True)
    document = _document(plan, setup, cells, checks, notes, started)
    stem = "bench_overhead" if plan.label is None else f"bench_overhead_{plan.label}"
    json_path, png_path = RESULTS / f"{stem}.json", RESULTS / f"{stem}.png"
    scratch = json_path.with_suffix(".json.tmp")
    scratch.write_bytes(orjson.dumps(document, option=orjson.OPT_INDENT_2))
    scratch.replace(json_path)
    report.plot_added(cells, png_path, f"{plan.delay_ms:g} ms upstream, one worker each")
    console.print(f"wrote {json_path.relative_to(ROOT)} and {png_path.relative_to(ROOT)}")


def _document(
    plan: Plan,
    setup: Setup,
    cells: dict[CellKey, Summary | None],
    checks: list[report.Check],
    notes: list[str],
    started: str,
) -> dict[str, Any]:
    return {
        "benchmark": "bench_overhead",
        "started_at": started,
        "finished_at": _now(),
        "plan": {
            "upstream_delay_ms": plan.delay_ms,
            "requests_per_cell": plan.requests,
            "warmup_per_cell": plan.warmup,
            "max_seconds_per_phase": plan.max_seconds,
            "concurrency": list(plan.concurrency),
            "quick": plan.quick,
            "baseline": plan.baseline,
            "responses": plan.with_responses,
            "request_body": orjson.loads(request_body(stream=True)),
            "responses_request_body": orjson.loads(responses_body(stream=True)),
        },
        "client": CLIENT,
        "machine": {
            "cpus": os.cpu_count(),
            "python": sys.version.split()[0],
            "platform": platform.platform(),
        },
        "litellm_measured": setup.litellm_missing is None,
        "litellm_not_measured_because": setup.litellm_missing,
        "targets": setup.described,
        "cells": report.cells_json(cells),
        "checks": report.checks_json(checks),
        "notes": notes,
    }


def _commit() -> str | None:
    """The commit measured, marked ``-dirty`` when the tree has changes."""
    try:
        described = subprocess.run(
            ["git", "describe", "--always", "--dirty", "--abbrev=12"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return described.stdout.strip() or None


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


if __name__ == "__main__":
    sys.exit(main())
