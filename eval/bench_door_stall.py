"""How long one hostile body holds every other request: /healthz while it is handled.

    python -m eval.bench_door_stall

A proxy in this process, the fake upstream in another (its own decode of a 15 MiB
body would hold this process's GIL and be charged to the proxy). For each body, one
client sends it while another asks /healthz every 5 ms until it is answered; the
slowest /healthz is the longest the proxy's event loop was held (or the machine was
busy: read it beside the load average printed with it).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import httpx

from eval._serve import serve_in_thread
from proxy.app import create_app
from proxy.config import load_settings

_TINY = b'{"role":"user"}'
BODIES = {
    "1,048,563 tiny messages": b'{"model":"m","messages":[' + b",".join([_TINY] * 1048563) + b"]}",
    "one message, 1,000,000 tiny objects in an unknown field": (
        b'{"model":"m","messages":[{"role":"user","content":"x"}],"x":['
        + b",".join([_TINY] * 1_000_000)
        + b"]}"
    ),
}
_UPSTREAM = (
    "import time; from eval.fake_upstream import FakeUpstream; "
    "print(FakeUpstream(record=False).start().base_url, flush=True); time.sleep(3600)"
)


def measure(base_url: str, body: bytes) -> tuple[int, float, list[float]]:
    """The body's status and seconds, and every /healthz latency meanwhile."""
    outcome: list[tuple[int, float]] = []

    def send() -> None:
        started = time.perf_counter()
        response = httpx.post(
            f"{base_url}/v1/chat/completions",
            content=body,
            headers={"content-type": "application/json"},
            timeout=300,
        )
        outcome.append((response.status_code, time.perf_counter() - started))

    sender = threading.Thread(target=send)
    sender.start()
    waits: list[float] = []
    with httpx.Client(timeout=300) as probe:
        while sender.is_alive():
            started = time.perf_counter()
            probe.get(f"{base_url}/healthz")
            waits.append(time.perf_counter() - started)
            time.sleep(0.005)
    sender.join()
    return outcome[0][0], outcome[0][1], sorted(waits)


def main() -> None:
    upstream = subprocess.Popen(
        [sys.executable, "-c", _UPSTREAM], stdout=subprocess.PIPE, text=True
    )
    try:
        assert upstream.stdout is not None
        settings = load_settings(upstream_base_url=upstream.stdout.readline().strip())
        with serve_in_thread(create_app(settings)) as base_url:
            for name, body in BODIES.items():
                status, took, waits = measure(base_url, body)
                print(
                    f"{name} ({len(body) / 2**20:.1f} MiB): {status} in {took:.2f} s; "
                    f"/healthz slowest {waits[-1] * 1000:.0f} ms, median "
                    f"{waits[len(waits) // 2] * 1000:.1f} ms over {len(waits)}; "
                    f"load average {os.getloadavg()[0]:.1f}",
                    flush=True,
                )
    finally:
        upstream.kill()
        upstream.wait()


if __name__ == "__main__":
    main()
