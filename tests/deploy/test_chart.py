"""The Helm chart, rendered by Helm itself (helm-python-sdk binds Helm v4's Go SDK)
and every object validated against Kubernetes' OpenAPI schemas (kubernetes-validate
ships them), under each values file in helm/toolgraph/ci/."""

from __future__ import annotations

import json
import re
import textwrap
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import helm_python as helm
import jsonschema
import pytest
import yaml
from kubernetes_validate import validate as validate_object

from proxy.config import Settings, load_settings

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "toolgraph"
VALUES_FILES = sorted((CHART / "ci").glob("*-values.yaml"))
SERVICE_MONITOR_SCHEMA = json.loads(
    (Path(__file__).parent / "schemas" / "servicemonitor-monitoring-v1.json").read_text()
)
# The oldest Kubernetes the chart declares, and the newest the schemas cover.
KUBE_VERSIONS = ("1.25.0", "1.37.0")
RELEASE, NAMESPACE = "tg", "llm"


@pytest.fixture(scope="module")
def chart() -> Iterator[helm.Chart]:
    with helm.Chart.load(CHART) as loaded:
        yield loaded


def values_of(name: str) -> dict[str, Any]:
    data = yaml.safe_load((CHART / "ci" / f"{name}-values.yaml").read_text())
    return data or {}


def render(chart: helm.Chart, values: dict[str, Any]) -> list[dict[str, Any]]:
    manifests = chart.render(values, name=RELEASE, namespace=NAMESPACE, is_install=True)
    objects = []
    for path, text in manifests.items():
        if path.endswith("NOTES.txt"):
            continue
        objects += [doc for doc in yaml.safe_load_all(text) if doc]
    return objects


def one(objects: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = [o for o in objects if o["kind"] == kind and name in (None, o["metadata"]["name"])]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def container(objects: list[dict[str, Any]]) -> dict[str, Any]:
    deployment = one(objects, "Deployment", f"{RELEASE}-toolgraph")
    containers: list[dict[str, Any]] = deployment["spec"]["template"]["spec"]["containers"]
    return next(c for c in containers if c["name"] == "toolgraph")


def literal_env(objects: list[dict[str, Any]]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container(objects)["env"] if "value" in e}


def test_values_files_cover_the_cases_the_issue_names() -> None:
    names = {path.name.removesuffix("-values.yaml") for path in VALUES_FILES}
    assert {"default", "gpu", "external-stores", "bundled-stores"} <= names


def test_helm_lint_finds_nothing_to_fix() -> None:
    for path in VALUES_FILES:
        values = yaml.safe_load(path.read_text()) or {}
        report = helm.lint(CHART, values, strict=True, kube_version="v1.30.0")
        problems = [m for m in report["messages"] if m["severity"] >= 2]
        assert not report["errors"], (path.name, report)
        assert not problems, (path.name, report)


@pytest.mark.parametrize("values_file", VALUES_FILES, ids=lambda p: p.name)
def test_every_rendered_object_validates(chart: helm.Chart, values_file: Path) -> None:
    objects = render(chart, yaml.safe_load(values_file.read_text()) or {})
    assert objects
    for obj in objects:
        assert obj["metadata"]["namespace"] == NAMESPACE, obj["metadata"]["name"]
        if obj["apiVersion"] == "monitoring.coreos.com/v1":
            jsonschema.validate(obj, SERVICE_MONITOR_SCHEMA)
            continue
        for version in KUBE_VERSIONS:
            validate_object(obj, version, strict=True)


def test_the_validator_rejects_a_broken_object(chart: helm.Chart) -> None:
    deployment = one(render(chart, {}), "Deployment")
    deployment["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] = "http"
    with pytest.raises(jsonschema.ValidationError):
        validate_object(deployment, KUBE_VERSIONS[0], strict=True)
    deployment["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] = 8000
    deployment["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = {}
    with pytest.raises(jsonschema.ValidationError):
        validate_object(deployment, KUBE_VERSIONS[0], strict=True)


def test_defaults_run_on_cpu_nodes_with_embedded_stores(chart: helm.Chart) -> None:
    objects = render(chart, {})
    kinds = sorted(o["kind"] for o in objects)
    assert kinds == ["ConfigMap", "Deployment", "Pod", "Service", "ServiceAccount"]
    main = container(objects)
    assert main["image"].endswith(":0.1.0-cpu")
    assert "nvidia.com/gpu" not in json.dumps(main["resources"])
    env = literal_env(objects)
    assert env["TOOLGRAPH_HOST"] == "0.0.0.0"
    assert not {"TOOLGRAPH_REDIS_URL", "TOOLGRAPH_QDRANT_URL", "TOOLGRAPH_NEO4J_URI"} & set(env)
    assert "envFrom" not in main
    assert main["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert main["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert main["securityContext"]["readOnlyRootFilesystem"] is True
    mounts = {m["mountPath"] for m in main["volumeMounts"]}
    assert {"/etc/toolgraph", "/tmp", env["TOOLGRAPH_DATA_DIR"]} <= mounts


def test_gpu_values_request_gpus_and_schedule_on_gpu_nodes(chart: helm.Chart) -> None:
    objects = render(chart, values_of("gpu"))
    pod = one(objects, "Deployment")["spec"]["template"]["spec"]
    main = container(objects)
    assert main["image"].endswith(":0.1.0-gpu")
    assert main["resources"]["requests"]["nvidia.com/gpu"] == "1"
    assert main["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert main["resources"]["requests"]["cpu"] == "2"  # the values' own requests are kept
    assert pod["nodeSelector"] == {
        "kubernetes.io/arch": "amd64",
        "nvidia.com/gpu.present": "true",
    }
    toleration_keys = {t["key"] for t in pod["tolerations"]}
    assert toleration_keys == {"dedicated", "nvidia.com/gpu"}
    assert pod["runtimeClassName"] == "nvidia"
    assert "nodeAffinity" in pod["affinity"]
    assert main["envFrom"] == [{"secretRef": {"name": "toolgraph-keys"}}]
    models = next(v for v in pod["volumes"] if v["name"] == "models")
    assert models["persistentVolumeClaim"]["claimName"] == "bge-m3-weights"
    assert "replicas" not in one(objects, "Deployment")["spec"]  # the HPA owns the count
    hpa = one(objects, "HorizontalPodAutoscaler")
    assert hpa["spec"]["scaleTargetRef"]["name"] == one(objects, "Deployment")["metadata"]["name"]
    assert one(objects, "PodDisruptionBudget")["spec"] == {
        "maxUnavailable": 1,
        "selector": one(objects, "Deployment")["spec"]["selector"],
    }


def test_the_walkthroughs_gpu_values_install(chart: helm.Chart) -> None:
    """The values file the GPU walk-through (docs/operations.md) shows renders and validates."""
    page = (ROOT / "docs" / "operations.md").read_text()
    walkthrough = page[page.index("## Kubernetes on GPU nodes") :]
    block = re.search(r"```yaml\n(.*?)```", walkthrough, re.DOTALL)
    assert block is not None
    values = yaml.safe_load(textwrap.dedent(block[1]))
    objects = render(chart, values)
    for obj in objects:
        if obj["apiVersion"] != "monitoring.coreos.com/v1":
            validate_object(obj, KUBE_VERSIONS[-1], strict=True)
    assert container(objects)["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert container(objects)["image"] == "registry.example.com/toolgraph:0.1.0-gpu"
    assert one(objects, "ConfigMap", f"{RELEASE}-toolgraph-dashboard")


def test_the_gpu_count_is_the_values_count(chart: helm.Chart) -> None:
    main = container(render(chart, {"gpu": {"enabled": True, "count": 4}}))
    assert main["resources"]["limits"]["nvidia.com/gpu"] == "4"


def test_external_stores_reach_toolgraph_as_its_own_settings(
    chart: helm.Chart, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    values = values_of("external-stores")
    objects = render(chart, values)
    settings = settings_in_pod(objects, monkeypatch, tmp_path)
    stores = values["stores"]
    assert settings.redis_url == stores["redis"]["url"]
    assert settings.qdrant_url == stores["qdrant"]["url"]
    assert settings.neo4j_uri == stores["neo4j"]["uri"]
    assert settings.workers == 2
    assert settings.timeouts.request == 600  # from `env`, which wins over the file
    assert settings.timeouts.upstream_read == 120  # from the ConfigMap's file
    assert [route.name for route in settings.models] == ["gpt-4o-mini", "llama-3.1-8b"]
    secret = one(objects, "Secret")
    assert container(objects)["envFrom"] == [{"secretRef": {"name": secret["metadata"]["name"]}}]
    assert set(secret["data"]) == set(values["secret"]["data"])


def test_bundled_stores_are_wired_to_their_services(
    chart: helm.Chart, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    objects = render(chart, values_of("bundled-stores"))
    settings = settings_in_pod(objects, monkeypatch, tmp_path)
    for store, url in [
        ("redis", settings.redis_url),
        ("qdrant", settings.qdrant_url),
        ("neo4j", settings.neo4j_uri),
    ]:
        assert url is not None, store
        match = re.fullmatch(r"\w+://([^:/]+):(\d+).*", url)
        assert match, url
        service = one(objects, "Service", match[1])
        assert int(match[2]) in [p["port"] for p in service["spec"]["ports"]]
        workload = next(
            o
            for o in objects
            if o["kind"] in ("Deployment", "StatefulSet") and o["metadata"]["name"] == match[1]
        )
        pod_labels = workload["spec"]["template"]["metadata"]["labels"]
        assert service["spec"]["selector"].items() <= pod_labels.items(), store
    assert {o["metadata"]["name"] for o in objects if o["kind"] == "StatefulSet"} == {
        f"{RELEASE}-toolgraph-qdrant",
        f"{RELEASE}-toolgraph-neo4j",
    }


def test_a_store_set_both_ways_is_refused(chart: helm.Chart) -> None:
    values = {"stores": {"qdrant": {"url": "http://q:6333", "bundled": {"enabled": True}}}}
    with pytest.raises(helm.HelmRenderError, match=r"stores\.qdrant"):
        render(chart, values)


@pytest.mark.parametrize(
    "values",
    [
        {"gpu": {"count": "two"}},
        {"stores": {"redis": {"url": "http://not-redis"}}},
        {"replicaCount": -1},
        {"service": {"type": "Headless"}},
        {"config": {"no_such_setting": 1}},
        {"typo_at_the_top": True},
    ],
)
def test_the_values_schema_rejects_wrong_values(chart: helm.Chart, values: dict[str, Any]) -> None:
    with pytest.raises(helm.HelmValuesError):
        chart.validate_schema(values)


def test_the_schema_allows_exactly_the_settings_toolgraph_knows() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    config = schema["properties"]["config"]
    assert config["additionalProperties"] is False
    assert set(config["properties"]) == set(Settings.model_fields)


def test_the_service_selects_the_proxy_pods_and_not_the_test_pod(chart: helm.Chart) -> None:
    objects = render(chart, {})
    selector = one(objects, "Service")["spec"]["selector"]
    pod_labels = one(objects, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert selector.items() <= pod_labels.items()
    assert not selector.items() <= one(objects, "Pod")["metadata"]["labels"].items()


def test_helm_test_calls_healthz_through_the_service(chart: helm.Chart) -> None:
    objects = render(chart, {})
    test_pod = one(objects, "Pod")
    assert test_pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    service = one(objects, "Service")
    url = f"http://{service['metadata']['name']}:{service['spec']['ports'][0]['port']}/healthz"
    command = test_pod["spec"]["containers"][0]["command"]
    assert command[-1] == url
    assert command[1] == "/opt/toolgraph/healthcheck.py"  # the file the Dockerfile copies
    assert "COPY deploy/healthcheck.py /opt/toolgraph/healthcheck.py" in (
        (ROOT / "Dockerfile").read_text()
    )


def test_a_changed_config_rolls_the_pods(chart: helm.Chart) -> None:
    def checksum(values: dict[str, Any]) -> str:
        deployment = one(render(chart, values), "Deployment")
        return str(deployment["spec"]["template"]["metadata"]["annotations"]["checksum/config"])

    assert checksum({}) != checksum({"config": {"log_level": "debug"}})


def test_notes_tell_where_the_service_is(chart: helm.Chart) -> None:
    notes = chart.render({}, name=RELEASE, namespace=NAMESPACE)["toolgraph/templates/NOTES.txt"]
    assert f"base_url = http://{RELEASE}-toolgraph.{NAMESPACE}.svc:8000/v1" in notes
    gpu_notes = chart.render(values_of("gpu"), name=RELEASE, namespace=NAMESPACE)[
        "toolgraph/templates/NOTES.txt"
    ]
    assert "https://toolgraph.example.com/v1" in gpu_notes
    assert "nvidia.com/gpu" in gpu_notes


def test_the_dashboard_configmap_carries_the_deploy_dashboard(chart: helm.Chart) -> None:
    dashboard = ROOT / "deploy" / "grafana" / "dashboards" / "toolgraph.json"
    copy = CHART / "dashboards" / "toolgraph.json"
    assert copy.read_text() == dashboard.read_text(), "run: python deploy/grafana/dashboard.py"
    objects = render(chart, values_of("gpu"))
    configmap = one(objects, "ConfigMap", f"{RELEASE}-toolgraph-dashboard")
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(configmap["data"]["toolgraph.json"]) == json.loads(dashboard.read_text())
    assert not [o for o in render(chart, {}) if o["metadata"]["name"].endswith("-dashboard")]


@pytest.mark.parametrize(
    ("service_type", "expected"),
    [
        ("ClusterIP", "port-forward service/tg-toolgraph 8000:8000"),
        ("NodePort", "jsonpath='{.spec.ports[0].nodePort}'"),
        ("LoadBalancer", "jsonpath='{.status.loadBalancer.ingress[0]}'"),
    ],
)
def test_notes_follow_the_service_type(chart: helm.Chart, service_type: str, expected: str) -> None:
    values = {"service": {"type": service_type}}
    notes = chart.render(values, name=RELEASE, namespace=NAMESPACE)["toolgraph/templates/NOTES.txt"]
    assert expected in notes


def test_the_chart_and_the_images_follow_the_package_version() -> None:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    chart_meta = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart_meta["appVersion"] == version
    compose = yaml.safe_load((ROOT / "deploy" / "compose.yaml").read_text())
    assert compose["services"]["toolgraph"]["image"] == f"toolgraph:{version}-cpu"


def test_every_values_key_is_commented() -> None:
    """Each key has a comment above it, or sits inside a value documented with `# --`."""
    undocumented = []
    documented_blocks: list[int] = []  # indents of ancestors documented with "# --"
    comment_block: list[str] = []
    for line in (CHART / "values.yaml").read_text().splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            comment_block.append(stripped)
            continue
        match = re.match(r"^( *)(- )?([A-Za-z][\w./-]*):", line)
        if match and not match[2]:
            indent = len(match[1])
            documented_blocks = [i for i in documented_blocks if i < indent]
            if not comment_block and not documented_blocks:
                undocumented.append(match[3])
            if any(c.startswith("# --") for c in comment_block):
                documented_blocks.append(indent)
        if stripped:
            comment_block = []
    assert not undocumented


def settings_in_pod(
    objects: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Settings:
    """Load toolgraph's settings as the pod would: the ConfigMap's file plus the env."""
    config = tmp_path / "config.yaml"
    config.write_text(one(objects, "ConfigMap", f"{RELEASE}-toolgraph")["data"]["config.yaml"])
    env = literal_env(objects)
    assert env.pop("TOOLGRAPH_CONFIG") == "/etc/toolgraph/config.yaml"
    secret_keys = [o for o in objects if o["kind"] == "Secret"]
    for secret in secret_keys:
        for key in secret["data"]:
            monkeypatch.setenv(key, "from-the-secret")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return load_settings(config)
