"""A first run that explains itself: `toolgraph serve` started for real, its log read.

The process says in one line where it listens and what it uses, with no secret in it,
and its log at info holds toolgraph's own lines only: no debug line of another library,
no progress bar. The embedding model and the catalog load in the background from
start-up: ``/readyz`` says ``loading`` meanwhile, and a request that comes first waits
for them, within its own deadline. The load is held where another process would hold
it: the graph store's write lock (a fresh store gets the built-in tools written).
"""

from __future__ import annotations

import fcntl
import re
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from proxy.logs import public_url
from testing.brain import Brain
from testing.fake_upstream import FakeUpstream
from tests.conftest import StartProxy, running_redis
from tests.orchestrate.conftest import ORCHESTRATE
from tests.proxy.test_cli_serve import serve, start

__all__ = ["serve"]  # a fixture of test_cli_serve's, used here by name

UPSTREAM_KEY = "sk-upstream-first-run-0123456789"
MASTER_KEY = "sk-master-first-run-0123456789"
REDIS_PASSWORD = "redis-password-first-run"

#: A line of toolgraph's own log format: time, level, logger, request id.
LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (\w+) ([\w.]+) \[[^\]]*\] ")


@pytest.fixture
def redis_with_password() -> Iterator[int]:
    """A redis-server of this test's own that asks for a password; its port."""
    with running_redis("--requirepass", REDIS_PASSWORD) as redis:
        yield redis.port


def startup_lines(log: Path) -> list[str]:
    return [line for line in log.read_text().splitlines() if "toolgraph serving on" in line]


def test_the_startup_line_says_what_the_process_serves_and_no_secret(
    serve: list[subprocess.Popen[bytes]],
    upstream: FakeUpstream,
    redis_with_password: int,
    tmp_path: Path,
) -> None:
    env = {
        "TOOLGRAPH_UPSTREAM_BASE_URL": upstream.base_url,
        "TOOLGRAPH_UPSTREAM_API_KEY": UPSTREAM_KEY,
        "TOOLGRAPH_MASTER_KEY": MASTER_KEY,
        "TOOLGRAPH_REDIS_URL": f"redis://:{REDIS_PASSWORD}@127.0.0.1:{redis_with_password}/0",
        "TOOLGRAPH_DEFAULT_MODE": "select",
    }
    log = tmp_path / "serve.log"
    url = start(serve, [], env, log)
    answered = httpx.get(f"{url}/readyz", timeout=10)  # Redis answers: the password works
    assert answered.json()["checks"]["redis"] == "ok", answered.text

    (line,) = startup_lines(log)
    assert LOG_LINE.match(line), line
    assert " INFO proxy." in line
    assert f"serving on {url} (pid " in line
    assert f"upstream {upstream.base_url} (key set)" in line
    assert "default mode select" in line
    assert "catalog loading in the background (5 built-in tools and any registered)" in line
    assert f"Redis redis://127.0.0.1:{redis_with_password}/0" in line
    assert f"vectors Qdrant local under {tmp_path / 'data'}" in line
    assert f"graph embedded under {tmp_path / 'data'}" in line
    text = log.read_text()
    for secret in (UPSTREAM_KEY, MASTER_KEY, REDIS_PASSWORD):
        assert secret not in text


def test_urls_in_the_log_lose_their_password_and_query() -> None:
    assert public_url("redis://user:pw@cache:6380/2?password=pw") == "redis://cache:6380/2"
    assert public_url("neo4j://neo4j:pw@[::1]:7687?database=g") == "neo4j://[::1]:7687"
    assert public_url("https://api.example.com/v1?api-key=k") == "https://api.example.com/v1"


def test_the_log_at_info_holds_toolgraph_lines_only(
    serve: list[subprocess.Popen[bytes]], upstream: FakeUpstream, tmp_path: Path
) -> None:
    brain = Brain()
    brain.one_step("Compute 6*7", "Compute", "evaluate_expression", {"expression": "6*7"})
    upstream.responder = brain
    env = {
        "TOOLGRAPH_UPSTREAM_BASE_URL": upstream.base_url,
        "TOOLGRAPH_ORCHESTRATE__GATE": "false",  # a short scripted request; see NO_GATE
    }
    log = tmp_path / "serve.log"
    url = start(serve, [], env, log)
    # The first orchestrated request loads the embedding model, indexes the catalog
    # (BM25 too) and plans: each library that could draw a bar or log a debug line runs.
    response = httpx.post(
        f"{url}/v1/chat/completions",
        json={"model": "m", "messages": [{"role": "user", "content": "6*7?"}], **ORCHESTRATE},
        timeout=300,
    )
    assert response.status_code == 200, response.text
    assert "42" in response.json()["choices"][0]["message"]["content"]

    text = log.read_text()
    assert "catalog index:" in text  # the catalog was indexed while this log was kept
    assert "\r" not in text  # no progress bar redrawn in place
    for line in text.splitlines():
        found = LOG_LINE.match(line)
        assert found is not None, f"not a line of toolgraph's log: {line!r}"
        level, logger = found.groups()
        own = logger.split(".")[0] in ("proxy", "graph_store", "retriever")
        assert own or level in ("WARNING", "ERROR", "CRITICAL"), line


@contextmanager
def graph_store_locked(data_dir: Path) -> Iterator[None]:
    """The embedded graph store's write lock, held as another process writing would."""
    folder = data_dir / "graph"
    folder.mkdir(parents=True)
    with (folder / "graph.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def ask_orchestrated(url: str) -> httpx.Response:
    return httpx.post(
        f"{url}/v1/chat/completions",
        json={"model": "m", "messages": [{"role": "user", "content": "6*7?"}], **ORCHESTRATE},
        timeout=300,
    )


def wait_ready(url: str, within: float = 300) -> httpx.Response:
    deadline = time.monotonic() + within
    while (ready := httpx.get(f"{url}/readyz", timeout=10)).status_code != 200:
        assert ready.json()["status"] == "loading", ready.text
        assert time.monotonic() < deadline, f"still not ready: {ready.text}"
        time.sleep(0.2)
    return ready


def test_readyz_says_loading_and_a_request_sent_meanwhile_is_answered_once_loaded(
    serve: list[subprocess.Popen[bytes]], upstream: FakeUpstream, tmp_path: Path
) -> None:
    brain = Brain()
    brain.one_step("Compute 6*7", "Compute", "evaluate_expression", {"expression": "6*7"})
    upstream.responder = brain
    env = {"TOOLGRAPH_UPSTREAM_BASE_URL": upstream.base_url, "TOOLGRAPH_ORCHESTRATE__GATE": "false"}
    log = tmp_path / "serve.log"
    with ThreadPoolExecutor(1) as pool:
        with graph_store_locked(tmp_path / "data"):
            url = start(serve, [], env, log)
            loading = httpx.get(f"{url}/readyz", timeout=10)
            assert loading.status_code == 503
            assert loading.json()["status"] == "loading"
            assert loading.json()["checks"]["catalog"] == "loading"
            assert "a request sent now waits" in loading.json()["message"]
            answer = pool.submit(ask_orchestrated, url)
            # The load cannot end while the lock is held: the request is waiting, not failed.
            assert httpx.get(f"{url}/readyz", timeout=10).json()["status"] == "loading"
            assert not answer.done()
        response = answer.result()
    assert response.status_code == 200, response.text
    assert "42" in response.json()["choices"][0]["message"]["content"]
    ready = wait_ready(url)
    assert ready.json() == {
        "status": "ready",
        "checks": {"catalog": "ok"},
        "background": {"catalog_sync": "done"},
    }
    assert "catalog ready: 5 tools, loaded in" in log.read_text()


def test_a_request_waiting_for_the_load_ends_at_its_own_deadline(
    serve: list[subprocess.Popen[bytes]], upstream: FakeUpstream, tmp_path: Path
) -> None:
    env = {
        "TOOLGRAPH_UPSTREAM_BASE_URL": upstream.base_url,
        "TOOLGRAPH_TIMEOUTS__REQUEST": "2",
        "TOOLGRAPH_DEFAULT_MODE": "orchestrate",
    }
    with graph_store_locked(tmp_path / "data"):
        url = start(serve, [], env, tmp_path / "serve.log")
        response = httpx.post(
            f"{url}/v1/chat/completions",
            json={"model": "m", "messages": [{"role": "user", "content": "6*7?"}]},
            timeout=300,
        )
        assert response.status_code == 504, response.text
        assert response.json()["error"]["code"] == "upstream_timeout"
        assert httpx.get(f"{url}/readyz", timeout=10).json()["status"] == "loading"


def test_each_worker_writes_its_own_startup_line(
    serve: list[subprocess.Popen[bytes]], upstream: FakeUpstream, tmp_path: Path
) -> None:
    env = {
        "TOOLGRAPH_UPSTREAM_BASE_URL": upstream.base_url,
        "TOOLGRAPH_ORCHESTRATE__PRELOAD": "false",
    }
    log = tmp_path / "serve.log"
    url = start(serve, ["--workers", "2"], env, log)
    deadline = time.monotonic() + 60
    while len(lines := startup_lines(log)) < 2:  # the port opens with the first worker
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.1)
    assert len(lines) == 2
    assert len({re.search(r"\(pid (\d+)\)", line).group(1) for line in lines}) == 2  # type: ignore[union-attr]
    assert all(f"serving on {url} " in line for line in lines)
    assert all("catalog and embedding model loaded on first use" in line for line in lines)


def test_a_load_at_start_up_that_fails_makes_the_process_not_ready(
    start_proxy: StartProxy, tmp_path: Path
) -> None:
    server = start_proxy(
        orchestrate={"preload": True}, retriever={"model_path": str(tmp_path / "no-model")}
    )
    ready = httpx.get(f"{server.url}/readyz", timeout=10)
    assert ready.status_code == 503
    assert ready.json() == {
        "status": "not ready",
        "checks": {"catalog": "failed: CatalogUnavailable"},
        "background": {"catalog_sync": "failed"},
    }
    response = httpx.post(
        f"{server.url}/v1/chat/completions",
        json={"model": "m", "messages": [{"role": "user", "content": "6*7?"}], **ORCHESTRATE},
        timeout=60,
    )
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "retriever_unavailable"
