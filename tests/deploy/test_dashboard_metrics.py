"""Every series the Grafana dashboard queries exists on ``/metrics`` of a running proxy.

The proxy is started the way the image starts it (``toolgraph serve``, settings from
TOOLGRAPH_* variables), in front of the fake upstream; plain and streamed chat
requests make the labelled series appear; then the exposition is parsed, each of the
dashboard's queries is parsed as PromQL (promql-parser, the Rust parser), and every
metric and label the queries name is looked up in the exposition.

Passthrough traffic produces the HTTP, upstream and token series, and those are
checked against real samples. Tool-call and cache series appear only once the proxy
runs tools or caches something, which no HTTP request reaches yet: for them the
exposition must declare the metric (its HELP and TYPE lines) and the labels are
those its collector declares, which prometheus_client enforces on every sample.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import promql_parser
import pytest
from openai import OpenAI
from prometheus_client.parser import text_string_to_metric_families

from proxy.reference import exposed_names, metric_collectors
from testing.fake_upstream import FakeUpstream
from tests.conftest import free_port

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "grafana" / "dashboards" / "toolgraph.json"
HEALTHCHECK = ROOT / "deploy" / "healthcheck.py"
# Grafana's variables, replaced by values of the same kind before parsing.
GRAFANA_VARIABLES = {"$__rate_interval": "1m", "$__range": "1h", "$mode": ".*", "$model": ".*"}
LABEL_VALUES = re.compile(r"label_values\((toolgraph_\w+),\s*(\w+)\)")
# The metrics passthrough requests must produce samples of.
PASSTHROUGH_METRICS = {
    "toolgraph_http_requests_total",
    "toolgraph_http_request_duration_seconds_bucket",
    "toolgraph_http_requests_in_flight",
    "toolgraph_time_to_first_token_seconds_bucket",
    "toolgraph_upstream_request_duration_seconds_bucket",
    "toolgraph_proxy_overhead_seconds_bucket",
    "toolgraph_upstream_tokens_total",
}


@dataclass(frozen=True)
class RunningProxy:
    url: str
    workers: int


@dataclass(frozen=True)
class Exposition:
    samples: dict[str, set[str]]  # sample name -> label names seen on it
    families: set[str]  # metric families declared (HELP/TYPE), samples or not
    workers: int

    def labels(self, name: str) -> set[str]:
        """The label names of a sample name: seen on samples, else declared in code."""
        if name in self.samples:
            return self.samples[name]
        collector = next((m for m in metric_collectors() if name in exposed_names(m)), None)
        assert collector is not None, f"{name} is neither on /metrics nor in proxy/metrics.py"
        # Under several workers only metrics some worker has touched are merged in.
        if self.workers == 1:
            assert collector._name in self.families, f"{name} is not declared on /metrics"
        return set(collector._labelnames) | ({"le"} if name.endswith("_bucket") else set())


# One process, and several workers whose metrics are merged through files.
@pytest.fixture(scope="module", params=[1, 2], ids=["1-worker", "2-workers"])
def running_proxy(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningProxy]:
    upstream = FakeUpstream().start()
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("TOOLGRAPH_")}
    env |= {
        "TOOLGRAPH_WORKERS": str(request.param),
        "TOOLGRAPH_PORT": str(port),
        "TOOLGRAPH_UPSTREAM_BASE_URL": upstream.base_url,
        "TOOLGRAPH_UPSTREAM_API_KEY": "sk-upstream",
        "TOOLGRAPH_DATA_DIR": str(tmp_path_factory.mktemp("data")),
        "TOOLGRAPH_ORCHESTRATE__PRELOAD": "false",  # chat requests only: no catalog needed
    }
    toolgraph = Path(sys.executable).parent / "toolgraph"
    process = subprocess.Popen([str(toolgraph), "serve"], env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_healthy(url, process)
        yield RunningProxy(url, request.param)
    finally:
        process.terminate()
        process.wait(30)
        upstream.stop()


def wait_until_healthy(url: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"toolgraph serve exited with {process.returncode}")
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise RuntimeError("toolgraph serve did not become healthy")


@pytest.fixture(scope="module")
def exposition(running_proxy: RunningProxy) -> Exposition:
    """/metrics after plain and streamed chat requests."""
    messages = [{"role": "user", "content": "hello there"}]
    with OpenAI(base_url=f"{running_proxy.url}/v1", api_key="sk-client", max_retries=0) as client:
        for _ in range(2):  # with several workers, each is likely to answer one
            client.chat.completions.create(model="fake-model", messages=messages)  # type: ignore[arg-type]
            stream = client.chat.completions.create(
                model="fake-model",
                messages=messages,  # type: ignore[arg-type]
                stream=True,
                stream_options={"include_usage": True},
            )
            assert [chunk for chunk in stream]
    text = httpx.get(f"{running_proxy.url}/metrics", timeout=5).text
    samples: dict[str, set[str]] = {}
    families = set()
    for family in text_string_to_metric_families(text):
        families.add(family.name)
        for sample in family.samples:
            samples.setdefault(sample.name, set()).update(sample.labels)
    return Exposition(samples, families, running_proxy.workers)


def dashboard_queries() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    queries = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            queries.append(variable["query"]["query"])
    return queries


def panel_queries() -> list[str]:
    return [q for q in dashboard_queries() if not LABEL_VALUES.fullmatch(q)]


def parse_query(query: str) -> promql_parser.Expr:
    for variable, value in GRAFANA_VARIABLES.items():
        query = query.replace(variable, value)
    assert "$" not in query, f"unknown Grafana variable in {query}"
    return promql_parser.parse(query)


def names_in(expr: promql_parser.Expr) -> tuple[dict[str, set[str]], set[str]]:
    """Each metric selected, with the labels its matchers use; the labels grouped on."""
    selectors: dict[str, set[str]] = {}
    grouping: set[str] = set()

    def visit(node: promql_parser.Expr) -> bool:
        if isinstance(node, promql_parser.VectorSelector):
            labels = {matcher.name for matcher in node.matchers.matchers}
            selectors.setdefault(node.name or "", set()).update(labels)
        elif isinstance(node, promql_parser.AggregateExpr) and node.modifier is not None:
            grouping.update(node.modifier.labels)
        elif isinstance(node, promql_parser.BinaryExpr) and node.modifier is not None:
            matching = node.modifier.matching
            grouping.update(matching.labels if matching is not None else ())
        return True

    promql_parser.walk(expr, pre_visit=visit)
    return selectors, grouping


def test_the_dashboard_queries_something() -> None:
    assert len(panel_queries()) >= 10
    variables = [LABEL_VALUES.fullmatch(q) for q in dashboard_queries()]
    assert {m[2] for m in variables if m} == {"mode", "model"}


@pytest.mark.parametrize("query", panel_queries())
def test_every_metric_and_label_queried_is_exposed(query: str, exposition: Exposition) -> None:
    selectors, grouping = names_in(parse_query(query))
    assert selectors, query
    for name, matched in selectors.items():
        labels = exposition.labels(name)
        assert matched <= labels, (name, matched - labels)
    available = set().union(*(exposition.labels(name) for name in selectors))
    assert grouping <= available, (query, grouping - available)


@pytest.mark.parametrize("query", [q for q in dashboard_queries() if LABEL_VALUES.fullmatch(q)])
def test_every_variable_lists_an_exposed_label(query: str, exposition: Exposition) -> None:
    match = LABEL_VALUES.fullmatch(query)
    assert match is not None
    assert match[1] in exposition.samples, f"{match[1]} has no samples to list values of"
    assert match[2] in exposition.samples[match[1]]


def test_every_toolgraph_metric_has_a_panel() -> None:
    """A metric added to proxy/metrics.py must get a panel, or this fails."""
    queried = {name for q in panel_queries() for name in names_in(parse_query(q))[0]}
    missing = [
        exposed_names(metric)[0]
        for metric in metric_collectors()
        if not set(exposed_names(metric)) & queried
    ]
    assert not missing, f"add panels to {DASHBOARD.relative_to(ROOT)} for {missing}"


def test_the_json_files_are_generated_from_dashboard_py() -> None:
    spec = importlib.util.spec_from_file_location(
        "dashboard", DASHBOARD.parents[1] / "dashboard.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert DASHBOARD in module.OUTPUTS
    for output in module.OUTPUTS:
        assert output.read_text() == module.render(), "run: python deploy/grafana/dashboard.py"


def test_panels_have_unique_ids_and_do_not_overlap() -> None:
    panels = json.loads(DASHBOARD.read_text())["panels"]
    ids = [panel["id"] for panel in panels]
    assert len(ids) == len(set(ids))
    cells: set[tuple[int, int]] = set()
    for panel in panels:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]
        area = {
            (x, y)
            for x in range(grid["x"], grid["x"] + grid["w"])
            for y in range(grid["y"], grid["y"] + grid["h"])
        }
        assert not area & cells, f"{panel['title']} overlaps another panel"
        cells |= area


def test_passthrough_traffic_produces_its_series(exposition: Exposition) -> None:
    for name in PASSTHROUGH_METRICS:
        assert name in exposition.samples, name


def test_every_defined_metric_is_exposed(exposition: Exposition) -> None:
    for metric in metric_collectors():
        if exposition.workers == 1:
            assert metric._name in exposition.families, metric._name
        for name in exposed_names(metric):
            if name in exposition.samples:
                assert set(metric._labelnames) <= exposition.samples[name], name


def test_the_healthcheck_script_passes_on_a_live_proxy(running_proxy: RunningProxy) -> None:
    result = subprocess.run(
        [sys.executable, str(HEALTHCHECK), f"{running_proxy.url}/healthz"],
        capture_output=True,
        timeout=30,
    )
    assert result.returncode == 0, result.stderr


def test_the_healthcheck_script_fails_where_nothing_listens() -> None:
    result = subprocess.run(
        [sys.executable, str(HEALTHCHECK), f"http://127.0.0.1:{free_port()}/healthz"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 1
    assert "unhealthy" in result.stderr
