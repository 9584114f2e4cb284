"""One end-to-end run: for each catalog size a proxy, and every arm on every task through it.

The proxy runs in a thread of this process with its stores in a temporary folder,
seeded with the catalog before it starts (so orchestrate mode plans over exactly
those tools) and preloaded (so the first request does not pay for the index).
The no-tools arm does not depend on the catalog: it runs once, at the first size.
The pack suite's proxy has the two demo packs in its settings (:mod:`eval.e2e.packs`),
and its all-tools client runs their in-process tools, as the proxy's executor does.
Rows are written to the results file as they come, so a run cut short keeps them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from eval.e2e.arms import Arm, ArmClient, Outcome
from eval.e2e.bfcl import bfcl_tools, serve_tools
from eval.e2e.catalog import catalog, seed_store
from eval.e2e.packs import PACKS, pack_functions, pack_tools
from eval.e2e.tasks import Task, is_correct
from graph_store.models import Tool
from proxy.app import create_app
from proxy.config import load_settings
from proxy.tools.packs.math.catalog import python_tools
from proxy.tools.sandbox.runner import Sandbox
from testing.serve import serve_in_thread

PROXY_SHARE = 0.9  # of the client's timeout, given to the proxy as timeouts.request


@dataclass(frozen=True, slots=True)
class RunConfig:
    upstream: str
    model: str
    sizes: tuple[int, ...]
    arms: tuple[Arm, ...]
    tasks: tuple[Task, ...]
    corpus: Path
    timeout: float
    planner: dict[str, Any] = field(default_factory=dict)  # planner settings to override
    bfcl: Path | None = None  # BFCL's data folder: its task tools join every catalog
    suite: Suite = "default"  # packs: the demo packs' tasks, tools and settings


Row = dict[str, Any]
#: dev, aside: the two parts of :mod:`eval.e2e.unseen`, over the built-in pack alone
Suite = Literal["default", "packs", "dev", "aside"]
SUITES: tuple[Suite, ...] = ("default", "packs", "dev", "aside")


def load_average() -> list[float]:
    return [round(value, 2) for value in os.getloadavg()]


@contextmanager
def proxy_for(config: RunConfig, tools: list[Tool], key: str) -> Iterator[str]:
    """A proxy whose catalog is ``tools``."""
    with tempfile.TemporaryDirectory(prefix="toolgraph-e2e-") as folder:
        seed_store(Path(folder), tools)
        settings = load_settings(
            upstream_base_url=config.upstream,
            upstream_api_key="sk-local-unused",
            # the tool_search arm measures toolgraph's search for a chat-only upstream: a
            # server that answers /v1/responses too (llama.cpp's does) must not get it
            upstream_responses="translate",
            master_key=key,
            data_dir=folder,
            timeouts={"request": config.timeout * PROXY_SHARE, "upstream_read": config.timeout},
            orchestrate={"preload": True},
            planner=config.planner,
            packs=PACKS if config.suite == "packs" else {},
            # A call's window covers writing its arguments, an LLM call: 30 s (the
            # default) timed out a 1.5B model's argument writer on a busy machine.
            # BFCL's task tools answer on loopback (eval.e2e.bfcl.serve_tools).
            executor={
                "call_timeout": config.timeout / 3,
                "deadline": config.timeout * 0.8,
                "allow_private_networks": True,
            },
        )
        with serve_in_thread(create_app(settings), ready_timeout=900) as url:
            yield url


def pairs(config: RunConfig, size: int) -> list[tuple[Arm, Task]]:
    """The (arm, task) pairs run at ``size``: no-tools only at the first size.

    One arm's tasks run one after the other, so that a server with a prompt cache
    (:mod:`eval.llm.server` keeps its recent prompts' KV state) serves the all-tools
    arm's long tool list from it after the first task: interleaved with the other
    arms, each of its requests re-read some 12,000 prompt tokens at 100 tools
    (minutes on two cores).
    """
    arms = [arm for arm in config.arms if arm != "no_tools" or size == config.sizes[0]]
    return [(arm, task) for arm in arms for task in config.tasks]


async def run_size(
    config: RunConfig,
    size: int,
    tools: list[Tool],
    proxy_url: str,
    key: str,
    emit: Callable[[Row], None],
) -> None:
    sandbox = Sandbox(timeout=30)
    try:
        async with contextlib.AsyncExitStack() as stack:
            runner = python_tools(sandbox)
            if config.suite == "packs":
                runner = await stack.enter_async_context(pack_functions(runner))
            client = ArmClient(proxy_url, key, config.model, config.timeout, tools, runner)
            stack.push_async_callback(client.aclose)
            for arm, task in pairs(config, size):
                outcome, seconds = await client.run(arm, task)
                emit(row_of(arm, size, task, outcome, seconds))
    finally:
        await sandbox.aclose()


def row_of(arm: Arm, size: int, task: Task, outcome: Outcome, seconds: float) -> Row:
    return {
        "arm": arm,
        "catalog": size if arm != "no_tools" else 0,
        "task": task.id,
        "kind": task.kind,
        "correct": not outcome.error and is_correct(task, outcome.answer),
        "seconds": round(seconds, 2),
        "prompt_tokens": outcome.prompt_tokens,
        "completion_tokens": outcome.completion_tokens,
        "tool_calls": outcome.tool_calls,
        "rounds": outcome.rounds,
        "error": outcome.error,
        "answer": outcome.answer[:600],
        "loaded": outcome.loaded,
        "trace": slim_trace(outcome.trace),
    }


_CALL_KEYS = ("node", "tool", "outcome", "error", "arguments", "attempts", "rejected")


def slim_trace(trace: dict[str, Any] | None) -> dict[str, Any] | None:
    """What the failure analysis reads: the plan, each call and its result's start."""
    if trace is None:
        return None
    plan = trace.get("plan") or {}
    calls = [call for call in trace.get("calls") or () if isinstance(call, dict)]
    return {
        "plan": {
            key: plan[key]
            for key in ("policy", "no_tools", "notes", "llm_calls", "subtasks", "choices")
            if key in plan
        },
        "calls": [
            {key: call[key] for key in _CALL_KEYS if key in call}
            | {"compressed": str(call.get("compressed") or "")[:300]}
            for call in calls
        ],
        "decisions": [
            {key: decision.get(key) for key in ("subtask", "kind", "chosen", "reason")}
            | {"shown": [c.get("tool") for c in decision.get("candidates") or []][:3]}
            for decision in plan.get("decisions") or ()
            if isinstance(decision, dict)
        ],
        "answer": trace.get("answer"),
        "gate": trace.get("gate"),
        "timings": trace.get("timings"),
        "upstream_usage": trace.get("upstream_usage"),  # each LLM call: purpose, tokens, s
    }


def run_all(config: RunConfig, emit: Callable[[Row], None]) -> None:
    key = "sk-e2e-" + secrets.token_hex(8)
    with contextlib.ExitStack() as stack:
        extra: list[Tool] = pack_tools() if config.suite == "packs" else []
        if config.bfcl is not None:
            extra = bfcl_tools(config.bfcl, stack.enter_context(serve_tools()))
        for size in config.sizes:
            tools = catalog(size, config.corpus, extra)
            with proxy_for(config, tools, key) as url:
                asyncio.run(run_size(config, size, tools, url, key, emit))


def total_pairs(config: RunConfig) -> int:
    return sum(len(pairs(config, size)) for size in config.sizes)


def sizes_list(text: str) -> Sequence[int]:
    return tuple(int(part) for part in text.split(","))


def setting(text: str) -> tuple[str, Any]:
    """``name=value`` of a planner setting; the value read as JSON when it is JSON."""
    name, _, value = text.partition("=")
    if not name or not value:
        raise ValueError(f"expected NAME=VALUE, got {text!r}")
    try:
        return name, json.loads(value)
    except ValueError:
        return name, value
