"""The first select and orchestrate requests after start-up, against the tenth.

What ``make run`` gives a new user: ``toolgraph serve`` with its defaults (the built-in
demo catalog, the embedded stores in a fresh data folder, so the catalog is indexed as
on a first run) in front of the fake upstream (``python -m testing.fake_upstream``, which
echoes). For each mode a fresh server is started twice: once the first request is sent
when ``/readyz`` says ready, once as soon as the port answers (it waits for the load
that runs in the background). Ten requests go one after the other, the same each time,
as a user repeating a question would send them; the tenth finds every cache warm.
Select mode is measured a third way: each request with twelve tools the server has
never seen (new names and descriptions), so the tenth pays what new tools cost once
start-up is over, and the first is compared with that.

    python -m eval.bench_first_request [--requests 10] [--restart-only | --select-only]
    python -m eval.bench_first_request --catalog-dir DIR [--restarts 5]

The first row is a restart: orchestrate on a data folder a server used before (catalog
indexed, model exported), the start every deployment makes but its first.

``--catalog-dir`` restarts a server several times on a data folder that already holds a
large catalog, indexed, and times each: the port, ``/readyz`` ready, the first
orchestrate request, a select request after it, the median of the next orchestrate
requests, and the end of the background sync (``/readyz``'s ``catalog_sync``), then
the p50 of each. The folder is one a server has served before (its index snapshot
written), made with the product's own commands, e.g. for ToolBench's 47k APIs:

    export TOOLGRAPH_DATA_DIR=.bench/tb47k
    toolgraph catalog import ../shared/data/toolbench_stable/corpus.jsonl.gz
    nice -n 10 toolgraph index build          # embeds every tool once (CPU: long)
    python -m eval.bench_first_request --catalog-dir .bench/tb47k --restarts 1

Prints, per mode and start: seconds until the port answered and until ``/readyz`` said
ready, the first and tenth request's time and their ratio (the target: within 2x), and
the load average of this machine before and after (it is shared).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from eval._bench_services import (
    ServerSpec,
    fake_upstream_spec,
    running,
    wait_ready,
)
from testing.ports import free_port

ROOT = Path(__file__).resolve().parent.parent
MODES = ("select", "orchestrate")
QUESTION = "What is the wavelength of a 2.4 GHz signal?"

#: The client's own tool list in select mode: what an agent framework would send.
CLIENT_TOOLS = {
    "get_weather": "Current weather and forecast for a city.",
    "send_email": "Send an email to a recipient with a subject and body.",
    "search_web": "Search the web and return the top results.",
    "convert_units": "Convert a quantity between units (length, mass, frequency, time).",
    "compute_wavelength": "Wavelength of a wave from its frequency and propagation speed.",
    "create_calendar_event": "Create an event in the user's calendar.",
    "translate_text": "Translate text between languages.",
    "get_stock_price": "Latest price of a stock ticker.",
    "book_flight": "Book a flight between two airports on a date.",
    "read_file": "Read a file from the user's workspace.",
    "evaluate_math": "Evaluate a mathematical expression.",
    "lookup_contact": "Find a contact's phone number and email address.",
}


@dataclass
class Run:
    mode: str  # "select, new tools": each request with tools never seen before
    start: str  # "after ready" or "at once"
    port_s: float  # process start to the port answering /healthz
    ready_s: float | None  # process start to /readyz 200 (None: not waited for)
    latencies: list[float]

    def row(self) -> str:
        first, tenth = self.latencies[0], self.latencies[-1]
        rest = statistics.median(self.latencies[1:])
        ready = "-" if self.ready_s is None else f"{self.ready_s:.1f}"
        return (
            f"| {self.mode} | {self.start} | {self.port_s:.1f} | {ready} | "
            f"{first * 1000:.0f} | {tenth * 1000:.0f} | {rest * 1000:.0f} | "
            f"{first / tenth:.1f}x |"
        )


def body(mode: str, fresh: int | None = None) -> dict[str, Any]:
    """The request; ``fresh``: the tools' variant (names and descriptions no other
    variant has), else the same tools every time."""
    message = {"role": "user", "content": QUESTION}
    request: dict[str, Any] = {"model": "m", "messages": [message], "toolgraph": {"mode": mode}}
    if mode == "select":
        tag = "" if fresh is None else f"_v{fresh}"
        note = "" if fresh is None else f" (service {fresh})"
        request["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": name + tag,
                    "description": description + note,
                    "parameters": {"type": "object", "properties": {"input": {"type": "string"}}},
                },
            }
            for name, description in CLIENT_TOOLS.items()
        ]
    return request


def toolgraph_spec(port: int, upstream_port: int, data_dir: Path, code: Path = ROOT) -> ServerSpec:
    """``toolgraph serve`` with its defaults, as ``make run`` starts it; ``code``: the
    source tree it runs (another commit's, unpacked with ``git archive``)."""
    return ServerSpec(
        name=f"toolgraph-{port}",
        port=port,
        argv=[sys.executable, "-m", "proxy", "serve", "--port", str(port)],
        env={
            "TOOLGRAPH_UPSTREAM_BASE_URL": f"http://127.0.0.1:{upstream_port}/v1",
            "TOOLGRAPH_DATA_DIR": str(data_dir),
            "PYTHONPATH": str(code),
        },
        unset=("TOOLGRAPH_",),
        health_path="/healthz",
        ready_timeout=120,
    )


def measure(
    mode: str,
    after_ready: bool,
    upstream_port: int,
    work: Path,
    n: int,
    fresh: bool = False,
    data_dir: Path | None = None,
) -> Run:
    """``data_dir``: a folder a server has used before (its catalog indexed, its model
    exported), else a new one."""
    port = free_port()
    spec = toolgraph_spec(port, upstream_port, data_dir or work / f"data-{port}")
    began = time.perf_counter()
    with running(spec, os.environ, work) as service:
        wait_ready(service)
        port_s = time.perf_counter() - began
        url = f"http://127.0.0.1:{port}"
        ready_s = _wait_ready(url, began) if after_ready else None
        latencies = []
        with httpx.Client(headers={"authorization": "Bearer sk-bench"}, timeout=600) as client:
            for index in range(n):
                request = body(mode, index if fresh else None)
                sent = time.perf_counter()
                response = client.post(f"{url}/v1/chat/completions", json=request)
                latencies.append(time.perf_counter() - sent)
                if response.status_code != 200:
                    raise SystemExit(f"{mode}: {response.status_code} {response.text[:300]}")
    start = "after /readyz" if after_ready else "at once"
    label = {"orchestrate": mode, "select": f"{mode}, same tools"}[mode]
    if fresh:
        label = f"{mode}, new tools each request"
    if data_dir is not None:
        label = f"{mode}, restart on a used data folder"
    return Run(label, start, port_s, ready_s, latencies)


def measure_restart(upstream_port: int, work: Path, n: int) -> Run:
    """Orchestrate after a restart: a first server indexes the catalog and exports the
    model into a folder and stops; the one measured starts on that folder (the case of
    every start but the first: nothing to embed or export)."""
    folder = work / "data-restart"
    measure("orchestrate", True, upstream_port, work, 1, data_dir=folder)
    return measure("orchestrate", True, upstream_port, work, n, data_dir=folder)


@dataclass
class Restart:
    """One restart on a folder that holds the catalog; seconds from process start."""

    load: float  # the 1-minute load average when it started
    port_s: float
    ready_s: float
    first_s: float  # the first orchestrate request's latency
    select_s: float  # a select request's, sent next
    rest_s: float  # median of the orchestrate requests after the first
    synced_s: float  # when /readyz said the background sync was done
    tools: str  # what the server's log said it served from the snapshot

    def row(self, label: str) -> str:
        return (
            f"| {label} | {self.load:.1f} | {self.port_s:.1f} | {self.ready_s:.1f} | "
            f"{self.ready_s - self.port_s:.1f} | {self.first_s * 1000:.0f} | "
            f"{self.select_s * 1000:.0f} | {self.rest_s * 1000:.0f} | {self.synced_s:.1f} |"
        )


def measure_catalog(
    upstream_port: int, work: Path, data_dir: Path, n: int, code: Path = ROOT
) -> Restart:
    """A restart on ``data_dir``: a folder a server has served its catalog from before."""
    load = os.getloadavg()[0]
    port = free_port()
    spec = toolgraph_spec(port, upstream_port, data_dir, code)
    began = time.perf_counter()
    with running(spec, os.environ, work) as service:
        wait_ready(service)
        port_s = time.perf_counter() - began
        url = f"http://127.0.0.1:{port}"
        ready_s = _wait_ready(url, began)
        times = []
        with httpx.Client(headers={"authorization": "Bearer sk-bench"}, timeout=600) as client:
            for mode in ["orchestrate", "select", *["orchestrate"] * (n - 1)]:
                sent = time.perf_counter()
                response = client.post(f"{url}/v1/chat/completions", json=body(mode))
                times.append(time.perf_counter() - sent)
                if response.status_code != 200:
                    raise SystemExit(f"{mode}: {response.status_code} {response.text[:300]}")
        synced_s = _wait_synced(url, began)
        served = _served_line(service.log_path.read_text(encoding="utf-8", errors="replace"))
    rest = statistics.median(times[2:]) if n > 1 else float("nan")
    return Restart(load, port_s, ready_s, times[0], times[1], rest, synced_s, served)


def _wait_synced(url: str, began: float) -> float:
    """When ``/readyz`` says the background sync is no longer running."""
    while True:
        background = httpx.get(f"{url}/readyz", timeout=30).json().get("background", {})
        if background.get("catalog_sync", "off") != "running":
            return time.perf_counter() - began
        time.sleep(0.2)


def _served_line(log: str) -> str:
    """The log's account of how the catalog was first served."""
    for line in log.splitlines():
        for said in ("catalog served from the index snapshot", "catalog ready:"):
            if said in line:
                return line[line.index(said) :].strip()
    return "no catalog line in the log"


def catalog_report(
    upstream_port: int, work: Path, data_dir: Path, args: argparse.Namespace
) -> None:
    load_before = os.getloadavg()
    code = args.code.resolve()
    runs = [
        measure_catalog(upstream_port, work, data_dir, args.requests, code)
        for _ in range(args.restarts)
    ]
    load_after = os.getloadavg()
    print(f"code {code}, data folder {data_dir}; {runs[0].tools}")
    print(
        "| restart | load | port open (s) | ready (s) | ready - port (s) | first orchestrate (ms) "
        f"| select next (ms) | median orchestrate 2nd-{_ordinal(args.requests)} (ms) "
        "| sync done (s) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for number, run in enumerate(runs, 1):
        print(run.row(str(number)))
    fields = [f.name for f in Restart.__dataclass_fields__.values() if f.name != "tools"]
    median = Restart(
        **{name: statistics.median(getattr(run, name) for run in runs) for name in fields},
        tools="",
    )
    print(median.row("p50"))
    _print_load(load_before, load_after)


def _restarts(work: Path, args: argparse.Namespace) -> None:
    with fake_upstream(work) as upstream_port:
        catalog_report(upstream_port, work, args.catalog_dir.resolve(), args)


def _print_load(before: tuple[float, float, float], after: tuple[float, float, float]) -> None:
    print(
        f"\n{os.cpu_count()} CPUs; load average (1, 5, 15 min) before "
        f"{', '.join(f'{x:.2f}' for x in before)}, after "
        f"{', '.join(f'{x:.2f}' for x in after)}"
    )


def _wait_ready(url: str, began: float) -> float:
    while httpx.get(f"{url}/readyz", timeout=30).status_code != 200:
        time.sleep(0.05)
    return time.perf_counter() - began


@contextmanager
def fake_upstream(work: Path) -> Iterator[int]:
    port = free_port()
    with running(fake_upstream_spec(port, 0.0, ROOT), os.environ, work) as service:
        wait_ready(service)
        yield port


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=10, help="requests per server")
    parser.add_argument(
        "--restart-only", action="store_true", help="only the restart on a used data folder"
    )
    parser.add_argument(
        "--select-only",
        action="store_true",
        help="only select mode's first start on a new data folder (after ready, and at once)",
    )
    parser.add_argument(
        "--catalog-dir",
        type=Path,
        help="restart on this data folder (a large catalog indexed and served before) only",
    )
    parser.add_argument("--restarts", type=int, default=5, help="restarts with --catalog-dir")
    parser.add_argument(
        "--code",
        type=Path,
        default=ROOT,
        help="with --catalog-dir: the source tree served (default this one; another "
        "commit's from `git archive`, to compare on the same folder)",
    )
    args = parser.parse_args(argv)
    if args.catalog_dir is not None:
        with tempfile.TemporaryDirectory(prefix="toolgraph-first-") as folder:
            _restarts(Path(folder), args)
        return 0
    load_before = os.getloadavg()
    runs = []
    with tempfile.TemporaryDirectory(prefix="toolgraph-first-") as folder:
        work = Path(folder)
        with fake_upstream(work) as upstream_port:
            if not args.select_only:
                runs.append(measure_restart(upstream_port, work, args.requests))
            modes = () if args.restart_only else ("select",) if args.select_only else MODES
            for mode in modes:
                for after_ready in (True, False):
                    runs.append(measure(mode, after_ready, upstream_port, work, args.requests))
            if not (args.restart_only or args.select_only):
                runs.append(measure("select", True, upstream_port, work, args.requests, True))
    load_after = os.getloadavg()
    print(
        f"| mode | first request sent | port open (s) | ready (s) | first (ms) "
        f"| {_ordinal(args.requests)} (ms) | median 2nd-{_ordinal(args.requests)} (ms) "
        "| first / last |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for run in runs:
        print(run.row())
    _print_load(load_before, load_after)
    return 0


def _ordinal(n: int) -> str:
    return f"{n}th" if n not in (1, 2, 3) else {1: "1st", 2: "2nd", 3: "3rd"}[n]


if __name__ == "__main__":
    sys.exit(main())
