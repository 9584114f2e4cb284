"""End to end with a real model: toolgraph orchestrate against all tools and no tools.

    python -m eval.e2e [--upstream URL --model NAME] [--sizes 10,100,1000]
                       [--arms orchestrate,all_tools,no_tools] [--tasks ID,…] [--label L]
                       [--suite default|packs|dev|aside]

``--arms`` may also name ``select`` and ``tool_search``: the client's own tools cut to
the few a task needs by select mode (Chat Completions) and by a hosted tool search
(the Responses API), the client running the calls as in ``all_tools``.

Without ``--upstream`` it starts Qwen2.5-Coder-1.5B-Instruct under
:mod:`eval.llm.server` (set up by ``eval/llm/setup.sh``) with ``--n-ctx`` tokens of
context. Every arm answers every task through a toolgraph proxy in this process
(see :mod:`eval.e2e.arms`), one request at a time, at temperature 0; a checker
scores each answer (:func:`eval.e2e.tasks.is_correct`). Rows, the summary and the
load average before and after go to ``eval/results/e2e_<label>.json``, the table
and plot (``eval/results/e2e_<label>.png``) are printed and drawn from them.

``--suite default`` (the default) runs the 28 math, physics and BFCL tasks over
catalogs of 10, 100 and 1,000 tools; ``--suite packs`` the questions over the demo
database and graph (:mod:`eval.e2e.packs`) over catalogs of 20, 100 and 1,000 tools,
the proxy configured with both demo packs (BFCL's tasks and tools are left out);
``--suite dev`` and ``--suite aside`` the two parts of :mod:`eval.e2e.unseen` (the
held-aside part is never tuned on) over the default sizes, without BFCL.
"""

from __future__ import annotations

import argparse
import json
import logging
import subprocess
import sys
import time
from collections.abc import Mapping
from contextlib import ExitStack
from pathlib import Path
from typing import Any, cast

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from eval.data_folder import dataset
from eval.e2e.arms import ARMS, DEFAULT_ARMS, Arm
from eval.e2e.bfcl import bfcl_tasks
from eval.e2e.packs import PACK_TASKS
from eval.e2e.packs import SIZES as PACK_SIZES
from eval.e2e.report import markdown, plot, summarise
from eval.e2e.run import (
    SUITES,
    Row,
    RunConfig,
    load_average,
    run_all,
    setting,
    sizes_list,
    total_pairs,
)
from eval.e2e.tasks import TASKS, Task
from eval.e2e.unseen import ASIDE, DEV
from eval.llm.launch import MODEL_NAME, local_model

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "eval" / "results"
CORPUS = dataset("toolbench_stable", "corpus.jsonl.gz")
BFCL = dataset("train", "bfcl")
LOG = ROOT / ".bench" / "e2e.log"
DEFAULT_SIZES = (10, 100, 1000)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream", help="an OpenAI-compatible base URL (ends in /v1)")
    parser.add_argument("--model", default=MODEL_NAME, help="the model name to ask for")
    parser.add_argument(
        "--sizes", type=sizes_list, default=None,
        help="catalog sizes (default: 10,100,1000; the packs suite 20,100,1000)",
    )  # fmt: skip
    parser.add_argument(
        "--suite", choices=SUITES, default="default",
        help="default: math, physics and BFCL tasks; packs: the demo database and graph; "
        "dev, aside: the two parts of the questions in eval.e2e.unseen",
    )  # fmt: skip
    parser.add_argument(
        "--arms", default=",".join(DEFAULT_ARMS), help=f"comma-separated, of {', '.join(ARMS)}"
    )
    parser.add_argument("--tasks", help="task ids, comma-separated (default: all)")
    parser.add_argument("--label", default="run", help="names the results files")
    parser.add_argument("--n-ctx", type=int, default=32768, help="the local model's context")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per request")
    parser.add_argument(
        "--planner", type=setting, action="append", default=[], metavar="NAME=VALUE",
        help="a planner setting for the proxy, e.g. reflection_rounds=0 (repeatable)",
    )  # fmt: skip
    parser.add_argument("--corpus", type=Path, default=CORPUS, help="toolbench corpus.jsonl.gz")
    parser.add_argument(
        "--bfcl", type=Path, default=BFCL,
        help="BFCL's data folder (its executable tasks join the tasks and their tools the "
        "catalogs; 'none' runs the built-in tasks alone)",
    )  # fmt: skip
    return parser.parse_args(argv)


def config_from(args: argparse.Namespace, upstream: str) -> RunConfig:
    arms = tuple(args.arms.split(","))
    unknown = set(arms) - set(ARMS)
    if unknown:
        raise SystemExit(f"unknown arms: {', '.join(sorted(unknown))} (known: {', '.join(ARMS)})")
    packs = args.suite == "packs"
    bfcl = None if str(args.bfcl) == "none" or args.suite != "default" else args.bfcl
    known = suite_tasks(args.suite, bfcl)
    sizes = args.sizes or (PACK_SIZES if packs else DEFAULT_SIZES)
    tasks = known
    if args.tasks:
        wanted = args.tasks.split(",")
        tasks = tuple(task for task in known if task.id in wanted)
        missing = set(wanted) - {task.id for task in tasks}
        if missing:
            raise SystemExit(f"unknown tasks: {', '.join(sorted(missing))}")
    return RunConfig(
        upstream, args.model, tuple(sizes), cast(tuple[Arm, ...], arms), tasks,
        args.corpus, args.timeout, dict(args.planner), bfcl, args.suite,
    )  # fmt: skip


def suite_tasks(suite: str, bfcl: Path | None) -> tuple[Task, ...]:
    if suite == "packs":
        return PACK_TASKS
    if suite in ("dev", "aside"):
        return DEV if suite == "dev" else ASIDE
    return TASKS + (bfcl_tasks(bfcl) if bfcl is not None else ())


def code_version() -> str:
    try:
        described = subprocess.run(
            ["git", "describe", "--always", "--dirty"],
            cwd=ROOT, capture_output=True, text=True, timeout=10, check=True,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return described.stdout.strip()


def measure(args: argparse.Namespace, upstream: str, console: Console) -> dict[str, Any]:
    config = config_from(args, upstream)
    path = RESULTS / f"e2e_{args.label}.json"
    report: dict[str, Any] = {
        "command": " ".join(["python -m eval.e2e", *sys.argv[1:]]),
        "code": code_version(),
        "model": args.model,
        "n_ctx": None if args.upstream else args.n_ctx,
        "planner": dict(args.planner),
        "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "load_before": load_average(),
        "rows": [],
    }
    rows: list[Row] = report["rows"]
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn())
    with Progress(*columns, TimeElapsedColumn(), console=console) as progress:
        bar = progress.add_task("requests", total=total_pairs(config))

        def emit(row: Row) -> None:
            rows.append(row)
            path.write_text(json.dumps(report, indent=1) + "\n")
            mark = "ok " if row["correct"] else "NO "
            progress.console.print(
                f"{mark} {row['arm']:<11} {row['catalog']:>5} {row['task']:<26} "
                f"{row['seconds']:>7.1f}s {row['prompt_tokens']:>7} tok "
                f"{','.join(row['tool_calls'])[:40]} {row['error'][:60]}",
                markup=False, highlight=False,
            )  # fmt: skip
            progress.advance(bar)

        run_all(config, emit)
    report["load_after"] = load_average()
    report["summary"] = summarise(rows)
    path.write_text(json.dumps(report, indent=1) + "\n")
    return report


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    LOG.parent.mkdir(parents=True, exist_ok=True)
    logging.basicConfig(
        filename=LOG, filemode="w", level=logging.INFO, format="%(asctime)s %(name)s %(message)s"
    )
    RESULTS.mkdir(parents=True, exist_ok=True)
    console = Console() if sys.stdout.isatty() else Console(width=140)
    with ExitStack() as stack:
        upstream = args.upstream or stack.enter_context(local_model(args.n_ctx))
        report = measure(args, upstream, console)
    print_report(report, RESULTS / f"e2e_{args.label}.png")
    broken = [row for row in report["rows"] if failed(row)]
    for row in broken:
        print(f"failed: {row['arm']} {row['catalog']} {row['task']}: {row['error']}")
    return 1 if broken else 0


def failed(row: Row) -> bool:
    """A request that ended in an error other than the context overflow this eval
    looks for: the path from client to model is broken, whatever the model knows."""
    return bool(row["error"]) and "context_length_exceeded" not in row["error"]


def print_report(report: Mapping[str, Any], image: Path) -> None:
    print(markdown(report["summary"]))
    print(f"load average before {report['load_before']}, after {report['load_after']}")
    plot(report["summary"], image, f"{report['model']}, code {report['code']}")


if __name__ == "__main__":
    raise SystemExit(main())
