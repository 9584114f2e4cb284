"""The built-in tools through their sandbox: real results, and hostile inputs contained."""

from __future__ import annotations

import asyncio
import functools
import json
import os
import signal
import socket
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path

import pytest
from pydantic import JsonValue

from proxy.errors import ToolInputRejected, ToolTimeout
from proxy.tools.packs.math import pack
from proxy.tools.sandbox import forkserver
from proxy.tools.sandbox.runner import Sandbox


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


async def the_spare(sandbox: Sandbox, within: float = 30.0) -> int:
    """The server's one child, once it has just one: the spare the next call will take."""
    return await one_child_but(sandbox, set(), within)


async def one_child_but(sandbox: Sandbox, gone: set[int], within: float = 30.0) -> int:
    """Wait until the server's only live child is none of ``gone`` (a killed child is
    reaped by then, and a fresh spare forked in its place); that child's pid."""
    for _ in range(int(within / 0.05)):
        found = children(sandbox.server_pid)
        if len(found) == 1 and found[0] not in gone:
            return found[0]
        await asyncio.sleep(0.05)
    found = children(sandbox.server_pid)
    assert len(found) == 1, found
    assert found[0] not in gone, found
    return found[0]


def alive(pid: int) -> bool:
    status = Path(f"/proc/{pid}/status")
    try:
        return "Z" not in dict(
            line.split(":\t", 1) for line in status.read_text().splitlines()
        ).get("State", "Z")
    except (OSError, ValueError):
        return False


def capped(pid: int) -> bool:
    """Whether the process has capped its address space: a spare does once it took a call."""
    try:
        limits = Path(f"/proc/{pid}/limits").read_text()
    except OSError:
        return False
    line = next(line for line in limits.splitlines() if line.startswith("Max address space"))
    return "unlimited" not in line


async def until(condition: Callable[[], bool], within: float = 30.0) -> None:
    for _ in range(int(within / 0.02)):
        if condition():
            return
        await asyncio.sleep(0.02)
    assert condition()


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
    spare = await the_spare(sandbox)  # the child the call will run in
    with pytest.raises(ToolTimeout, match=r"longer than 1\.5s"):
        await sandbox.run("evaluate_expression", {"expression": expression})
    # The child was killed, not left burning CPU: only a fresh spare is left.
    await one_child_but(sandbox, {spare})
    assert not alive(spare)
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
    spare = await the_spare(sandbox)
    await sandbox.aclose()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    await until(lambda: not alive(spare))  # and its spare with it


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
    spare = await the_spare(sandbox)
    task = asyncio.create_task(
        sandbox.run("evaluate_expression", {"expression": "factorial(10**7)"})
    )
    await until(lambda: capped(spare))  # it took the call
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await one_child_but(sandbox, {spare})
    assert not alive(spare)


async def test_each_call_takes_a_spare_that_served_nothing_before(sandbox: Sandbox) -> None:
    spares = [await the_spare(sandbox)]
    for n in range(3):
        assert not capped(spares[-1])  # waiting: no call's limits yet
        assert await sandbox.run("evaluate_expression", {"expression": f"6*{n}"}) == {
            "value": 6.0 * n,
            "exact": str(6 * n),
        }
        spares.append(await one_child_but(sandbox, set(spares)))
        assert not alive(spares[-2])  # the call's child exited
    assert len(set(spares)) == 4


async def test_a_call_does_not_wait_for_a_running_one() -> None:
    # The spare's replacement is forked when the call ends, or at once when another
    # connection waits: a short call started beside a long one ends first.
    box = Sandbox(timeout=120, memory_mb=256)
    try:
        await box.start()
        spare = await the_spare(box)
        long = asyncio.create_task(
            box.run("evaluate_expression", {"expression": "factorial(10**7)"})
        )
        await until(lambda: capped(spare))
        short = asyncio.create_task(box.run("evaluate_expression", {"expression": "6*7"}))
        done, _ = await asyncio.wait([long, short], return_when=asyncio.FIRST_COMPLETED)
        assert done == {short}
        assert short.result() == {"value": 42.0, "exact": "42"}
        long.cancel()
        with pytest.raises(asyncio.CancelledError):
            await long
        await one_child_but(box, {spare})
    finally:
        await box.aclose()


async def test_no_spare_outlives_its_server(sandbox: Sandbox) -> None:
    spare = await the_spare(sandbox)
    server = sandbox.server_pid
    assert server is not None
    os.kill(server, signal.SIGKILL)
    await until(lambda: not alive(spare))


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
