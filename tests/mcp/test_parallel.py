"""Orchestrate mode runs independent calls of different MCP servers and a built-in tool
at once, through the official SDK: the plan's two MCP calls (one to each of two
servers) each wait at a rendezvous until the other has arrived, so they can only both
succeed if they run side by side; the trace names each MCP call's server."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator

from testing.brain import Brain, plan_of
from tests.conftest import StartProxy
from tests.mcp.conftest import python_server, wait_connected
from tests.mcp.test_orchestrate import orchestrate

#: Seconds the rendezvous waits for every caller: a guard against a hang, not a measure.
PATIENCE = 60.0


class Rendezvous:
    """A loopback port where ``expected`` callers meet: each is told ``together`` once
    all have connected, or ``alone`` if the others did not come within ``PATIENCE``."""

    def __init__(self, expected: int) -> None:
        self._expected = expected
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self.arrived = 0
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        deadline = time.monotonic() + PATIENCE
        callers: list[socket.socket] = []
        with contextlib.suppress(TimeoutError):
            while len(callers) < self._expected:
                self._listener.settimeout(max(deadline - time.monotonic(), 0.001))
                callers.append(self._listener.accept()[0])
        self.arrived = len(callers)
        word = b"together\n" if len(callers) == self._expected else b"alone\n"
        for caller in callers:
            with caller:
                caller.sendall(word)

    def close(self) -> None:
        self._thread.join(PATIENCE + 10)
        self._listener.close()


@contextlib.contextmanager
def rendezvous(expected: int) -> Iterator[Rendezvous]:
    meeting = Rendezvous(expected)
    try:
        yield meeting
    finally:
        meeting.close()


def test_calls_to_two_mcp_servers_and_a_built_in_tool_run_at_once(
    start_proxy: StartProxy, brain: Brain
) -> None:
    server = start_proxy(
        mcp_servers=[python_server().model_dump(), python_server("other").model_dump()],
        planner={"policy": "llm", "top_k": 40, "memory_k": 0},
        orchestrate={"gate": False},
        executor={"call_timeout": 2 * PATIENCE},  # a lone caller hears "alone", no timeout
    )
    wait_connected(server)
    brain.plan = plan_of(
        ("Meet the first partner at the rendezvous", []),
        ("Meet the second partner at the rendezvous", []),
        ("Evaluate the expression 6 * 7", []),
    )
    brain.tools = {
        "first partner": "test_meet",
        "second partner": "other_meet",
        "Evaluate": "evaluate_expression",
    }
    with rendezvous(2) as meeting:
        brain.arguments = {
            "first partner": {"port": meeting.port},
            "second partner": {"port": meeting.port},
            "Evaluate": {"expression": "6 * 7"},
        }
        _, calls = orchestrate(server, "Meet both partners and work out 6 * 7.")
    assert meeting.arrived == 2
    first, second, evaluated = calls["s1"], calls["s2"], calls["s3"]
    assert [first["tool"], second["tool"], evaluated["tool"]] == [
        "test_meet",
        "other_meet",
        "evaluate_expression",
    ]
    assert [c["outcome"] for c in (first, second, evaluated)] == ["ok"] * 3
    assert first["output"] == second["output"] == "together"
    assert "42" in str(evaluated["output"])
    # Every call started before any finished: none waited for another.
    assert max(c["started"] for c in calls.values()) < min(c["finished"] for c in calls.values())
    assert [first["mcp_server"], second["mcp_server"], evaluated["mcp_server"]] == [
        "test",
        "other",
        None,
    ]
    assert [first["host"], second["host"], evaluated["host"]] == ["mcp:test", "mcp:other", "local"]
