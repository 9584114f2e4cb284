"""Orchestrate mode against a real, weak model: does every request end cleanly?

    python -m eval.weak_model_orchestrate [--base-url URL] [--model NAME] [--limit N]

Without ``--base-url`` it starts SmolLM2-135M-Instruct under ``llama_cpp.server``
with the ``chatml-function-calling`` chat format, from ``.bench/llama-venv`` (set up
as :mod:`eval.weak_model_arguments` says). A toolgraph proxy runs in this process,
aimed at that server, and a few dozen requests for a math and physics course
assistant go through it with the official ``openai`` SDK, half of them streamed,
some with progress events. After each one the script reads the request's trace.

The model's JSON is often wrong and its tool choices poor, which is the point. The
report counts requests that ended in a well-formed answer (an answer or a question
to the user), clean errors (OpenAI's error shape), crashes (a 5xx that is not a
clean error, toolgraph's internal error, a broken stream, an exception in the
client) and hangs (past the client's hard timeout); from the traces, planner
fallbacks, argument retries and give-ups, and tool outcomes. Crashes and hangs are
bugs and make the exit status 1. Results: a table here and
``eval/results/weak_model_orchestrate.json``; the proxy's log goes to
``.bench/weak_model_orchestrate.log``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import secrets
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
import openai
from openai.types.chat import ChatCompletionMessageParam
from rich import box
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from eval._bench_report import percentile
from eval._serve import serve_in_thread
from eval.weak_model_arguments import RESULTS, ROOT, llama_server
from proxy.app import create_app
from proxy.config import load_settings

CLIENT_TIMEOUT = 240.0  # seconds; past it a request counts as hung
PROXY_SHARE = 0.75  # of the client's timeout, given to the proxy as timeouts.request
TRACE_HEADER = "x-toolgraph-trace-id"
LOG = ROOT / ".bench" / "weak_model_orchestrate.log"


@dataclass(frozen=True, slots=True)
class Probe:
    """One request: the user's turns with the assistant's replies between them."""

    turns: tuple[str, ...]
    needs_tool: bool = True

    def messages(self) -> list[ChatCompletionMessageParam]:
        system: ChatCompletionMessageParam = {
            "role": "system",
            "content": "You are a teaching assistant for a university math and physics course.",
        }
        said: list[ChatCompletionMessageParam] = [system]
        for i, text in enumerate(self.turns):
            if i % 2:
                said.append({"role": "assistant", "content": text})
            else:
                said.append({"role": "user", "content": text})
        return said


PROBES: tuple[Probe, ...] = (
    Probe(("What is 2 * pi * 50?",)),
    Probe(("Integrate sin(x) from 0 to pi.",)),
    Probe(("What is the difference between a scalar and a vector?",), needs_tool=False),
    Probe(("Differentiate x**3 and evaluate the derivative at x = 2.",)),
    Probe(("Cross product of [1, 0, 0] and [0, 1, 0].",)),
    Probe(("Electric field of a 1 nC point charge at the origin, at the point (1, 0).",)),
    Probe(("Compute 1/sqrt(epsilon_0*mu_0) and tell me which constant it is.",)),
    Probe(("Integrate x**2 from 0 to 3, then multiply the result by 2.",)),
    Probe(("Magnitude of the vector [3, 4].",)),
    Probe(("Simulate a wave pulse on a 1 m string, wave speed 1 m/s, for 0.25 s.",)),
    Probe(("Explain in one sentence what Gauss's law says.",), needs_tool=False),
    Probe(("Derivative of exp(2*x) at x = 0.",)),
    Probe(("Dot product of [1, 2, 3] and [4, 5, 6], then the angle between them.",)),
    Probe(("Solve Laplace's equation on a 21x21 grid with the top edge held at 10 V.",)),
    Probe(("Skin depth sqrt(2/(omega*mu_0*sigma)) for omega = 6.283e9 and sigma = 5.8e7.",)),
    Probe(("Integrate exp(-x) from 0 to infinity.",)),
    Probe(("Magnetic field of a long straight wire carrying 1 A, 1 m away from it.",)),
    Probe(("Compute the kinetic energy of my car.",)),
    Probe(("Second derivative of sin(x).",)),
    Probe(("Normalize [0, 0, 5], then take its cross product with [1, 0, 0].",)),
    Probe(("What is 7 factorial?",)),
    Probe(("Numerically integrate 1/(1+x**2) from 0 to 1 and compare it with pi/4.",)),
    Probe(("Field of two wires, 1 A at (0, 0) and -1 A at (1, 0), at the point (0.5, 0).",)),
    Probe(("Derivative of t**2 at t = 5, then the integral of t**2 from 0 to 5.",)),
    Probe(
        (
            "I have a point charge of 2 nC at the origin.",
            "Noted: a 2 nC point charge at the origin.",
            "What is its electric field at the point (0, 2)?",
        )
    ),
    Probe(("Thanks, that helps a lot!",), needs_tool=False),
    Probe(("Angle between [1, 0] and [0, 1], in degrees.",)),
    Probe(("A 10 uF capacitor is charged to 5 V. Compute the energy it stores, C*V**2/2.",)),
    Probe(("Add [1, 2] and [3, 4], then give the magnitude of the sum.",)),
    Probe(("Find the antiderivative of cos(x) and evaluate it at pi/2.",)),
)


def is_streamed(index: int) -> bool:
    return index % 2 == 1


def wants_progress(index: int) -> bool:
    """Progress on every other pair, so that both modes run with it and without it."""
    return (index // 2) % 2 == 0


# --- what happened to one request ---------------------------------------------------------


@dataclass(slots=True)
class Exchange:
    """What the client saw of one request, before the trace is read."""

    outcome: str = "crash"  # answer, empty, error, crash, hang
    content: str = ""
    progress_events: int = 0
    finish_reason: str | None = None
    trace_id: str | None = None
    status: int | None = None
    error: str = ""
    usage: dict[str, Any] | None = None
    seconds: float = 0.0
    trace: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)


def error_outcome(status: int | None, body: object) -> str:
    """``error`` for an error in OpenAI's shape, ``crash`` for anything else.

    toolgraph's own internal error is a crash whatever its shape: it means an
    exception nobody handled reached the outermost edge.
    """
    error = body.get("error", body) if isinstance(body, dict) else None
    if not isinstance(error, dict) or not isinstance(error.get("message"), str):
        return "crash" if status is None or status >= 500 else "error"
    return "crash" if error.get("code") == "internal_error" else "error"


def answer_kind(exchange: Exchange) -> str:
    """The request's end as the report counts it: answer, question, error, empty, crash, hang."""
    if exchange.outcome != "answer":
        return exchange.outcome
    kind = (exchange.trace or {}).get("answer", {}).get("kind")
    if kind == "error":
        return "error"
    if not exchange.content.strip():
        return "empty"
    return "question" if kind == "question" else "answer"


@dataclass(frozen=True, slots=True)
class TraceFigures:
    """What one trace says about planning and tool calls."""

    policy: str | None = None
    fell_back: bool = False
    plan_llm_calls: int = 0
    calls: int = 0
    retried: int = 0
    gave_up: int = 0
    outcomes: Mapping[str, int] = field(default_factory=dict)


def trace_figures(trace: Mapping[str, Any] | None) -> TraceFigures:
    if not trace:
        return TraceFigures()
    plan = trace.get("plan") or {}
    notes = [str(note) for note in plan.get("notes") or ()]
    calls = [call for call in trace.get("calls") or () if isinstance(call, dict)]
    return TraceFigures(
        policy=plan.get("policy"),
        fell_back=any("fell back" in note for note in notes),
        plan_llm_calls=int(plan.get("llm_calls") or 0),
        calls=len(calls),
        retried=sum(1 for call in calls if int(call.get("attempts") or 0) > 1),
        gave_up=sum(
            1
            for call in calls
            if call.get("outcome") == "failed" and "no valid arguments" in str(call.get("error"))
        ),
        outcomes=dict(Counter(str(call.get("outcome")) for call in calls)),
    )


ENDS = ("answer", "question", "error", "empty", "crash", "hang")


def tally(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The report's figures over the rows that :func:`describe` wrote."""
    ends = Counter(str(row["end"]) for row in rows)
    figures = [trace_figures(row.get("trace")) for row in rows]
    outcomes: Counter[str] = Counter()
    for figure in figures:
        outcomes.update(figure.outcomes)
    seconds = [float(row["seconds"]) for row in rows]
    return {
        "requests": len(rows),
        "streamed": sum(1 for row in rows if row["stream"]),
        "well_formed": ends["answer"] + ends["question"],
        "ends": {end: ends[end] for end in ENDS},
        "traces_read": sum(1 for row in rows if row.get("trace")),
        "planner_fallbacks": sum(1 for f in figures if f.fell_back),
        "planner_policies": dict(Counter(f.policy or "no trace" for f in figures)),
        "plan_llm_calls": sum(f.plan_llm_calls for f in figures),
        "tool_calls": sum(f.calls for f in figures),
        "argument_retries": sum(f.retried for f in figures),
        "argument_give_ups": sum(f.gave_up for f in figures),
        "tool_outcomes": dict(outcomes.most_common()),
        "seconds_p50": round(percentile(seconds, 50), 1) if seconds else None,
        "seconds_p90": round(percentile(seconds, 90), 1) if seconds else None,
        "seconds_max": round(max(seconds), 1) if seconds else None,
    }


_PLAN_KEYS = ("policy", "no_tools", "notes", "llm_calls", "tokens", "subtasks", "choices")
_CALL_KEYS = ("node", "tool", "outcome", "error", "question", "arguments", "attempts", "reused")


def slim_trace(trace: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The trace as the results file keeps it: without candidate lists and raw outputs."""
    if trace is None:
        return None
    plan = trace.get("plan") or {}
    calls = [call for call in trace.get("calls") or () if isinstance(call, dict)]
    return {
        "plan": {key: plan[key] for key in _PLAN_KEYS if key in plan},
        "calls": [
            {key: call[key] for key in _CALL_KEYS if key in call}
            | {"compressed": str(call.get("compressed") or "")[:300]}
            for call in calls
        ],
        **{key: trace[key] for key in ("answer", "timings", "usage") if key in trace},
    }


def describe(index: int, probe: Probe, exchange: Exchange) -> dict[str, Any]:
    """One row of the results file."""
    return {
        "index": index,
        "request": probe.turns[-1],
        "needs_tool": probe.needs_tool,
        "stream": is_streamed(index),
        "progress": wants_progress(index),
        "end": answer_kind(exchange),
        "seconds": round(exchange.seconds, 2),
        "status": exchange.status,
        "error": exchange.error,
        "content": exchange.content[:500],
        "progress_events": exchange.progress_events,
        "finish_reason": exchange.finish_reason,
        "usage": exchange.usage,
        "trace_id": exchange.trace_id,
        "trace": slim_trace(exchange.trace),
        "notes": exchange.notes,
    }


# --- sending --------------------------------------------------------------------------------


class Sender:
    """Sends probes through the proxy one at a time and reads each one's trace."""

    def __init__(self, proxy_url: str, key: str, model: str, timeout: float) -> None:
        self.model = model
        self.timeout = timeout
        self.client = openai.AsyncOpenAI(
            base_url=f"{proxy_url}/v1", api_key=key, max_retries=0, timeout=timeout
        )
        self.http = httpx.AsyncClient(
            base_url=proxy_url, headers={"authorization": f"Bearer {key}"}, timeout=30
        )

    async def aclose(self) -> None:
        await self.client.close()
        await self.http.aclose()

    async def send(self, index: int, probe: Probe) -> Exchange:
        exchange = Exchange()
        started = time.perf_counter()
        try:
            async with asyncio.timeout(self.timeout):
                if is_streamed(index):
                    await self._stream(probe, wants_progress(index), exchange)
                else:
                    await self._complete(probe, wants_progress(index), exchange)
        except TimeoutError:
            exchange.outcome = "hang"
            exchange.error = f"no end within {self.timeout:.0f} s"
        except openai.APIStatusError as exc:
            exchange.status = exc.status_code
            exchange.trace_id = exc.response.headers.get(TRACE_HEADER)
            exchange.outcome = error_outcome(exc.status_code, exc.body)
            exchange.error = f"{exc.status_code}: {exc.message}"
        except openai.APIError as exc:  # an error event that ended a started stream
            exchange.outcome = error_outcome(None, exc.body)
            exchange.error = f"{type(exc).__name__}: {exc.message}"
        except Exception as exc:  # what this script exists to catch
            exchange.outcome = "crash"
            exchange.error = f"{type(exc).__name__}: {exc}"
        exchange.seconds = time.perf_counter() - started
        if exchange.trace_id:
            exchange.trace = await self._trace(exchange.trace_id, exchange)
        elif exchange.outcome != "hang":
            exchange.notes.append(f"no {TRACE_HEADER} header: was the request orchestrated?")
        return exchange

    def _options(self, progress: bool) -> dict[str, Any]:
        return {"toolgraph": {"mode": "orchestrate", "progress": progress}}

    async def _complete(self, probe: Probe, progress: bool, exchange: Exchange) -> None:
        raw = await self.client.chat.completions.with_raw_response.create(
            model=self.model, messages=probe.messages(), extra_body=self._options(progress)
        )
        exchange.status = raw.status_code
        exchange.trace_id = raw.headers.get(TRACE_HEADER)
        completion = raw.parse()
        choice = completion.choices[0]
        exchange.content = choice.message.content or ""
        exchange.finish_reason = choice.finish_reason
        exchange.usage = completion.usage.model_dump() if completion.usage else None
        exchange.outcome = "answer"

    async def _stream(self, probe: Probe, progress: bool, exchange: Exchange) -> None:
        async with self.client.chat.completions.with_streaming_response.create(
            model=self.model,
            messages=probe.messages(),
            stream=True,
            stream_options={"include_usage": True},
            extra_body=self._options(progress),
        ) as response:
            exchange.status = response.status_code
            exchange.trace_id = response.headers.get(TRACE_HEADER)
            parts: list[str] = []
            async for chunk in await response.parse():
                if chunk.usage is not None:
                    exchange.usage = chunk.usage.model_dump()
                for choice in chunk.choices:
                    extra = choice.delta.model_extra or {}
                    if extra.get("reasoning_content"):
                        exchange.progress_events += 1
                    parts.append(choice.delta.content or "")
                    exchange.finish_reason = choice.finish_reason or exchange.finish_reason
        exchange.content = "".join(parts)
        if exchange.finish_reason is None:
            exchange.outcome = "crash"
            exchange.error = "the stream ended without a finish_reason"
        else:
            exchange.outcome = "answer"

    async def _trace(self, trace_id: str, exchange: Exchange) -> dict[str, Any] | None:
        # A stream's trace may be stored a moment after its last event.
        for pause in (0.0, 1.0, 3.0):
            await asyncio.sleep(pause)
            try:
                response = await self.http.get(f"/v1/toolgraph/traces/{trace_id}")
            except httpx.HTTPError as exc:
                exchange.notes.append(f"trace: {type(exc).__name__}: {exc}")
                return None
            if response.status_code == 200:
                trace: dict[str, Any] = response.json()
                return trace
            if response.status_code != 404:
                break
        exchange.notes.append(f"trace: {response.status_code} {response.text[:200]}")
        return None


async def send_all(
    sender: Sender, probes: Sequence[Probe], console: Console
) -> list[dict[str, Any]]:
    rows = []
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn())
    try:
        with Progress(*columns, TimeElapsedColumn(), console=console) as progress:
            task = progress.add_task("orchestrate requests", total=len(probes))
            for index, probe in enumerate(probes):
                exchange = await sender.send(index, probe)
                row = describe(index, probe, exchange)
                rows.append(row)
                progress.console.print(
                    f"{index:>2} {row['end']:<8} {row['seconds']:>6.1f}s "
                    f"{'stream' if row['stream'] else 'json  '} {probe.turns[-1][:60]}",
                    markup=False,
                    highlight=False,
                )
                progress.advance(task)
    finally:
        await sender.aclose()
    return rows


# --- the servers ----------------------------------------------------------------------------


@contextmanager
def toolgraph_proxy(upstream: str, key: str, request_timeout: float) -> Iterator[str]:
    """A toolgraph proxy in a thread of this process, with its stores in a temporary folder."""
    with tempfile.TemporaryDirectory(prefix="toolgraph-weak-") as data_dir:
        settings = load_settings(
            upstream_base_url=upstream,
            upstream_api_key="sk-local-unused",
            master_key=key,
            data_dir=data_dir,
            timeouts={"request": request_timeout},
            orchestrate={"preload": True},  # the catalog's load is not the first request's
        )
        # the catalog is loaded at start-up: minutes on a busy machine
        with serve_in_thread(create_app(settings), ready_timeout=300) as url:
            yield url


# --- the report -----------------------------------------------------------------------------


def render(report: Mapping[str, Any]) -> Table:
    figures = report["figures"]
    table = Table(
        title=f"orchestrate mode, {figures['requests']} requests, model {report['model']}",
        box=box.SIMPLE_HEAD,
        padding=(0, 1),
        pad_edge=False,
    )
    table.add_column("figure")
    table.add_column("value", justify="right")
    table.add_row("requests (streamed)", f"{figures['requests']} ({figures['streamed']})")
    table.add_row("well-formed: answer + question", str(figures["well_formed"]))
    for end in ENDS:
        table.add_row(f"  ended: {end}", str(figures["ends"][end]))
    table.add_row("traces read", str(figures["traces_read"]))
    table.add_row("planner fallbacks to the LLM-free policy", str(figures["planner_fallbacks"]))
    table.add_row("planner LLM calls", str(figures["plan_llm_calls"]))
    table.add_row("tool calls", str(figures["tool_calls"]))
    table.add_row("  arguments retried (attempts > 1)", str(figures["argument_retries"]))
    table.add_row("  arguments given up (no valid arguments)", str(figures["argument_give_ups"]))
    for outcome, count in figures["tool_outcomes"].items():
        table.add_row(f"  outcome: {outcome}", str(count))
    table.add_row("wall time p50 / p90 / max (s)", _seconds(figures))
    return table


def _seconds(figures: Mapping[str, Any]) -> str:
    return f"{figures['seconds_p50']} / {figures['seconds_p90']} / {figures['seconds_max']}"


def run(args: argparse.Namespace, upstream: str, console: Console) -> dict[str, Any]:
    code = code_version()  # before the run: the tree may change while it goes on
    key = "sk-weak-" + secrets.token_hex(8)
    probes = PROBES[: args.limit] if args.limit else PROBES
    with toolgraph_proxy(upstream, key, args.timeout * PROXY_SHARE) as proxy_url:
        sender = Sender(proxy_url, key, args.model, args.timeout)
        rows = asyncio.run(send_all(sender, probes, console))
    return {
        "command": " ".join(["python -m eval.weak_model_orchestrate", *sys.argv[1:]]),
        "code": code,
        "model": args.model,
        "chat_format": None if args.base_url else args.chat_format,
        "client_timeout_s": args.timeout,
        "proxy_request_timeout_s": args.timeout * PROXY_SHARE,
        "figures": tally(rows),
        "rows": rows,
    }


def code_version() -> str:
    """The commit the figures were taken at, ``-dirty`` when the tree had changes."""
    try:
        described = subprocess.run(
            ["git", "describe", "--always", "--dirty"],
            cwd=ROOT, capture_output=True, text=True, timeout=10, check=True,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return described.stdout.strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", help="an OpenAI-compatible server already running")
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--limit", type=int, help="send only the first N requests")
    parser.add_argument("--timeout", type=float, default=CLIENT_TIMEOUT, help="seconds a request")
    parser.add_argument("--chat-format", default="chatml-function-calling")
    args = parser.parse_args(argv)
    LOG.parent.mkdir(parents=True, exist_ok=True)
    logging.basicConfig(
        filename=LOG, filemode="w", level=logging.INFO, format="%(asctime)s %(name)s %(message)s"
    )
    console = Console() if sys.stdout.isatty() else Console(width=120)
    if args.base_url:
        report = run(args, args.base_url, console)
    else:
        with llama_server(args.chat_format) as upstream:
            report = run(args, upstream, console)
    console.print(render(report))
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "weak_model_orchestrate.json").write_text(json.dumps(report, indent=2) + "\n")
    ends = report["figures"]["ends"]
    return 1 if ends["crash"] or ends["hang"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
