"""The built-in tools through their sandbox: real results, and hostile inputs contained."""

from __future__ import annotations

import asyncio
import functools
import json
import os
import signal
import socket
from collections.abc import AsyncIterator, Mapping
from pathlib import Path

import pytest
from pydantic import JsonValue

from proxy.errors import ToolInputRejected, ToolTimeout
from proxy.tools import forkserver, pack
from proxy.tools.sandbox import Sandbox


@pytest.fixture
async def sandbox() -> AsyncIterator[Sandbox]:
    box = Sandbox(timeout=1.5, memory_mb=256)
    await box.start()  # so that no test times the server's start
    yield box
    await box.aclose()


def children(pid: int | None) -> list[int]:
    """Live processes whose parent is ``pid``."""
    found = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(line.split(":\t", 1) for line in status.read_text().splitlines())
        except (OSError, ValueError):
            continue
        if fields.get("PPid", "").strip() == str(pid) and "Z" not in fields.get("State", ""):
            found.append(int(status.parent.name))
    return found


async def no_children_left(sandbox: Sandbox, within: float = 30.0) -> None:
    """Wait until the sandbox server has no live child (a killed one is reaped by then)."""
    for _ in range(int(within / 0.05)):
        if not children(sandbox.server_pid):
            return
        await asyncio.sleep(0.05)
    assert children(sandbox.server_pid) == []


def environment_of(pid: int | None) -> list[bytes]:
    return Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")


async def test_a_call_computes_in_a_child_process() -> None:
    # A timeout no load reaches: eight integrals at once on a busy two-core machine.
    sandbox = Sandbox(timeout=120, memory_mb=256)
    try:
        result = await sandbox.run(
            "evaluate_expression",
            {"expression": "sqrt(2/(2*pi*f*mu_0*sigma))", "variables": {"f": 1e9, "sigma": 5.8e7}},
        )
        assert isinstance(result, dict)
        assert result["value"] == pytest.approx(2.09e-6, rel=2e-3)
        results = await asyncio.gather(
            *(
                sandbox.run("calculate_integral", {"expression": f"x**{n}", "lower": 0, "upper": 1})
                for n in range(8)
            )
        )
    finally:
        await sandbox.aclose()
    assert [r["value"] for r in results if isinstance(r, dict)] == [
        pytest.approx(1 / (n + 1)) for n in range(8)
    ]


@pytest.mark.parametrize(
    "expression",
    ["factorial(10**7)", "gamma(factorial(25))"],
)
async def test_a_runaway_computation_is_stopped_and_the_proxy_lives_on(
    sandbox: Sandbox, expression: str
) -> None:
    with pytest.raises(ToolTimeout, match=r"longer than 1\.5s"):
        await sandbox.run("evaluate_expression", {"expression": expression})
    await no_children_left(sandbox)  # the child was killed, not left burning CPU
    assert await sandbox.run("evaluate_expression", {"expression": "6*7"}) == {
        "value": 42.0,
        "exact": "42",
    }


async def test_hostile_expressions_are_refused_before_any_work(sandbox: Sandbox) -> None:
    # Refused, not timed out: the checks run before any computation.
    for expression in ("9**9**9**9", "__import__('os').system('touch /tmp/pwned')", "().__class__"):
        with pytest.raises(ToolInputRejected, match=r"allowed|exponents are limited"):
            await sandbox.run("evaluate_expression", {"expression": expression})
    with pytest.raises(ToolInputRejected, match="arguments over"):
        await sandbox.run("evaluate_expression", {"expression": "1" * 100_000})


async def test_a_memory_hungry_call_dies_alone() -> None:
    # 256 MiB on top of the fork: a 200 by 200 Laplace grid fits, integrating a
    # high power of a sum (SymPy expands it) does not; the server survives it. A
    # timeout no load reaches: at load 7-11 the expansion once took over 20 s to hit
    # the cap, and the call ended as a timeout instead.
    box = Sandbox(timeout=120, memory_mb=256)
    try:
        with pytest.raises(ToolInputRejected, match="memory"):
            await box.run("calculate_integral", {"expression": "(a+b+c+d+x)**300"})
        result = await box.run(
            "run_simulation",
            {"sim_type": "laplace2d", "params": {"nx": 200, "top": 1, "max_iterations": 50}},
        )
        assert isinstance(result, dict)
        assert result["iterations"] == 50
    finally:
        await box.aclose()


def swallow_memory_error(arguments: Mapping[str, JsonValue]) -> JsonValue:
    """Like a C extension whose allocation failed: it reports something else."""
    blocks = []
    try:
        while True:
            blocks.append(bytearray(1024 * 1024))
    except MemoryError:
        blocks.clear()
    raise SystemError("returned NULL without setting an exception")


def serve_in_a_child(call: forkserver.Call, request: dict[str, JsonValue]) -> JsonValue:
    """One call through the fork server's child side, under its real limits."""
    ours, theirs = socket.socketpair()
    pid = os.fork()
    if pid == 0:  # the child never returns from _serve_one
        ours.close()
        forkserver._serve_one(theirs, 10, 256, call)
    theirs.close()
    try:
        payload = json.dumps(request).encode()
        forkserver._read(ours, forkserver.HEADER.size)  # its pid
        ours.sendall(forkserver.HEADER.pack(len(payload)) + payload)
        size = forkserver.HEADER.unpack(forkserver._read(ours, forkserver.HEADER.size))[0]
        reply: JsonValue = json.loads(forkserver._read(ours, size))
    finally:
        ours.close()
        os.waitpid(pid, 0)
    return reply


def test_an_error_raised_once_memory_ran_out_is_a_memory_error() -> None:
    hungry = functools.partial(pack.call_json, functions={"hungry": swallow_memory_error})
    reply = serve_in_a_child(hungry, {"name": "hungry", "arguments": {}})
    assert reply == {"error": "the computation needed too much memory", "kind": "input"}


def test_an_error_with_memory_to_spare_stays_internal() -> None:
    def failing(arguments: Mapping[str, JsonValue]) -> JsonValue:
        raise SystemError("a bug")

    broken = functools.partial(pack.call_json, functions={"broken": failing})
    reply = serve_in_a_child(broken, {"name": "broken", "arguments": {}})
    assert reply == {"error": "SystemError: a bug", "kind": "internal"}


async def test_closing_stops_the_fork_server(sandbox: Sandbox) -> None:
    await sandbox.start()
    pid = sandbox.server_pid
    assert pid is not None
    await sandbox.aclose()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


async def test_a_dead_fork_server_is_replaced(sandbox: Sandbox) -> None:
    first = sandbox.server_pid
    assert first is not None
    os.kill(first, signal.SIGKILL)
    for _ in range(100):  # until asyncio has noticed the exit
        if not sandbox.running:
            break
        await asyncio.sleep(0.02)
    assert await sandbox.run("vector_operation", {"operation": "magnitude", "a": [3, 4]}) == {
        "operation": "magnitude",
        "result": 5.0,
    }
    assert sandbox.running
    assert sandbox.server_pid not in (None, first)


async def test_cancelling_a_call_kills_its_child(sandbox: Sandbox) -> None:
    task = asyncio.create_task(
        sandbox.run("evaluate_expression", {"expression": "factorial(10**7)"})
    )
    for _ in range(100):
        await asyncio.sleep(0.02)
        if children(sandbox.server_pid):
            break
    assert children(sandbox.server_pid)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await no_children_left(sandbox)


async def test_the_sandbox_sees_none_of_the_proxys_secrets(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TOOL_SECRET_FOR_TEST", "sk-do-not-leak")
    box = Sandbox(timeout=5)
    try:
        await box.start()
        pid = box.server_pid
        environ = environment_of(pid)
    finally:
        await box.aclose()
    assert not [entry for entry in environ if b"sk-do-not-leak" in entry]
    assert b"OPENBLAS_NUM_THREADS=1" in environ
