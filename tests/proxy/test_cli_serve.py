"""`toolgraph serve` as a user runs it: a real process, one or several workers."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from proxy.cli import uvicorn_options
from proxy.config import load_settings
from proxy.logs import SupervisorLines
from testing.fake_upstream import FakeUpstream
from tests.conftest import free_port
from tests.orchestrate.conftest import ORCHESTRATE, Brain
from tests.proxy.test_registry import ADMIN, TOOLS, weather_api, weather_spec

__all__ = ["weather_api"]  # a fixture of test_registry's, used here by name


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[list[subprocess.Popen[bytes]]]:
    processes: list[subprocess.Popen[bytes]] = []
    yield processes
    for process in processes:
        process.terminate()
        try:  # shutdown waits for a model load still running: 36 s seen at load 15
            process.wait(120)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()  # reaped, or the Popen warns (warnings are errors)


def start(
    processes: list[subprocess.Popen[bytes]],
    args: list[str],
    env: dict[str, str],
    log: Path,
    within: float = 300,
) -> str:
    port = free_port()
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "proxy", "serve", "--port", str(port), *args],
            env={**os.environ, **env},
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    processes.append(process)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"toolgraph exited: {log.read_text()}")
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return url
        except httpx.TransportError:
            time.sleep(0.1)
    raise AssertionError(f"toolgraph did not come up within {within} s: {log.read_text()}")


def chat_requests_counted(url: str) -> float:
    text = httpx.get(f"{url}/metrics", timeout=10).text
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "toolgraph_http_requests_total"
        and sample.labels["route"] == "/v1/chat/completions"
    )


def test_serve_with_defaults_answers(
    serve: list[subprocess.Popen[bytes]], upstream: FakeUpstream, tmp_path: Path
) -> None:
    env = {"TOOLGRAPH_UPSTREAM_BASE_URL": upstream.base_url}
    url = start(serve, [], env, tmp_path / "serve.log")
    response = httpx.post(
        f"{url}/v1/chat/completions",
        json={"model": "m", "messages": [{"role": "user", "content": "ping"}]},
        timeout=10,
    )
    assert response.json()["choices"][0]["message"]["content"] == "You said: ping"
    assert (tmp_path / "data").is_dir()  # the embedded data directory was made


def test_metrics_add_up_across_workers(
    serve: list[subprocess.Popen[bytes]], upstream: FakeUpstream, tmp_path: Path
) -> None:
    config = tmp_path / "toolgraph.yaml"
    config.write_text(
        f"upstream_base_url: {upstream.base_url}\n"
        "orchestrate: {preload: false}\n"  # chat requests only: no catalog in two workers
    )
    url = start(serve, ["--workers", "2", "--config", str(config)], {}, tmp_path / "serve.log")
    sent = 30
    for _ in range(sent):  # a fresh connection each, so both workers get some
        with httpx.Client() as client:
            response = client.post(
                f"{url}/v1/chat/completions",
                json={"model": "m", "messages": [{"role": "user", "content": "x"}]},
                timeout=10,
            )
            assert response.status_code == 200
    assert chat_requests_counted(url) == sent
    assert len(upstream.requests) == sent


# NO_GATE: the no-tool gate is off in these tests: their scripted requests ("6*7?",
# "Paris?") are shorter than the real ones it was fitted on; it has tests of its own.
# Two workers each load the embedding model and the catalog: minutes on a busy machine.


@pytest.mark.timeout(900)
@pytest.mark.parametrize("preload", [True, False], ids=["preload", "on_demand"])
def test_orchestrate_works_on_every_worker_with_the_embedded_stores(
    serve: list[subprocess.Popen[bytes]], upstream: FakeUpstream, tmp_path: Path, preload: bool
) -> None:
    brain = Brain()
    brain.one_step("Compute 6*7", "Compute", "evaluate_expression", {"expression": "6*7"})
    upstream.responder = brain
    config = tmp_path / "toolgraph.yaml"
    config.write_text(
        f"upstream_base_url: {upstream.base_url}\n"
        f"orchestrate: {{preload: {str(preload).lower()}, gate: false}}\n"  # see NO_GATE
    )
    log = tmp_path / "serve.log"
    # Start-up loads the embedding model in each worker (and with preload the catalog).
    url = start(serve, ["--workers", "2", "--config", str(config)], {}, log, within=300)
    for _ in range(12):  # a fresh connection each, so both workers get some
        with httpx.Client() as client:
            response = client.post(
                f"{url}/v1/chat/completions",
                json={
                    "model": "m",
                    "messages": [{"role": "user", "content": "6*7?"}],
                    **ORCHESTRATE,
                },
                timeout=120,
            )
        assert response.status_code == 200, response.text
        assert "42" in response.json()["choices"][0]["message"]["content"]
    assert "Traceback" not in log.read_text()  # no worker failed to start, or died


def ask_weather(url: str) -> str:
    """An orchestrated request on a fresh connection (either worker may take it)."""
    with httpx.Client() as client:
        response = client.post(
            f"{url}/v1/chat/completions",
            json={"model": "m", "messages": [{"role": "user", "content": "Paris?"}], **ORCHESTRATE},
            timeout=120,
        )
    assert response.status_code == 200, response.text
    content: str = response.json()["choices"][0]["message"]["content"]
    return content


def tool_names(url: str) -> set[str]:
    with httpx.Client() as client:
        listed = client.get(
            f"{url}{TOOLS}", headers={"authorization": f"Bearer {ADMIN}"}, timeout=30
        )
    assert listed.status_code == 200, listed.text
    return {tool["name"] for tool in listed.json()["data"]}


@pytest.mark.timeout(900)
def test_a_tool_registered_through_one_worker_is_used_by_every_worker(
    serve: list[subprocess.Popen[bytes]], upstream: FakeUpstream, tmp_path: Path, weather_api: str
) -> None:
    brain = Brain()
    brain.one_step("Get the weather in Paris", "weather", "get_weather", {"city": "Paris"})
    upstream.responder = brain
    config = tmp_path / "toolgraph.yaml"
    config.write_text(
        f"upstream_base_url: {upstream.base_url}\n"
        "executor: {allow_private_networks: true, retries: 0}\n"
        "orchestrate: {gate: false}\n"  # see NO_GATE
    )
    args = ["--workers", "2", "--config", str(config)]
    url = start(serve, args, {"TOOLGRAPH_ADMIN_KEY": ADMIN}, tmp_path / "serve.log", within=300)
    assert not any("celsius" in ask_weather(url) for _ in range(8))  # catalogs loaded, no tool

    registered = httpx.post(
        f"{url}{TOOLS}",
        json={"openai": [weather_spec(weather_api)]},
        headers={"authorization": f"Bearer {ADMIN}"},
        timeout=30,
    )
    assert registered.status_code == 201, registered.text
    assert all("get_weather" in tool_names(url) for _ in range(10))  # each worker lists it
    deadline = time.monotonic() + 120
    while not all("celsius" in ask_weather(url) for _ in range(10)):
        assert time.monotonic() < deadline, "a worker still plans without the new tool"


def worker_pids(parent: int) -> list[int]:
    """uvicorn's worker processes under ``parent``: spawned interpreters, not its helpers."""
    children = Path(f"/proc/{parent}/task/{parent}/children").read_text().split()
    pids = [int(pid) for pid in children]
    return [pid for pid in pids if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes()]


def test_a_worker_that_dies_is_said_in_the_log_and_replaced(
    serve: list[subprocess.Popen[bytes]], upstream: FakeUpstream, tmp_path: Path
) -> None:
    # uvicorn's supervisor replaces a worker silently at the default log level: one
    # killed on a busy host (its health check unanswered) left nothing to read
    log = tmp_path / "serve.log"
    env = {"TOOLGRAPH_UPSTREAM_BASE_URL": upstream.base_url}
    url = start(serve, ["--workers", "2"], env, log)
    (victim, *_) = worker_pids(serve[0].pid)
    os.kill(victim, signal.SIGKILL)
    deadline = time.monotonic() + 60  # a bound for a failure: the supervisor looks every 0.5 s
    while f"Child process [{victim}] died" not in log.read_text():
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.1)
    assert httpx.get(f"{url}/healthz", timeout=10).status_code == 200


def test_workers_get_the_start_timeout_and_the_supervisors_lines() -> None:
    settings = load_settings(workers=2, worker_start_timeout=90.5)
    options = uvicorn_options(settings)
    assert options["timeout_worker_healthcheck"] == 91
    assert options["workers"] == 2
    single = uvicorn_options(load_settings())
    assert "timeout_worker_healthcheck" not in single
    assert "workers" not in single


@pytest.mark.parametrize(
    ("level", "message", "kept"),
    [
        (logging.INFO, "Child process [41] died", True),
        (logging.ERROR, "New child process [42] was not ready in time; keeping worker", True),
        (logging.INFO, "Started server process [43]", True),
        (logging.INFO, "Waiting for application startup.", False),
        (logging.INFO, "Application startup complete.", False),
        (logging.WARNING, "Invalid HTTP request received.", True),
    ],
)
def test_the_supervisor_filter_keeps_restarts_and_warnings(
    level: int, message: str, kept: bool
) -> None:
    record = logging.LogRecord("uvicorn.error", level, __file__, 1, message, None, None)
    assert SupervisorLines().filter(record) is kept
