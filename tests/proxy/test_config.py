"""Settings: sources, precedence, and errors that name the bad key."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import retriever.config
from proxy.config import ConfigError, PlannerSettings, load_settings
from proxy.upstream import ModelRouter

ROUTES = """
upstream_base_url: http://upstream.example:8000/v1
port: 9001
models:
  - name: fast
    litellm_model: openai/gpt-4o-mini
    base_url: https://api.openai.com/v1
    api_key_env: TEST_OPENAI_KEY
  - name: claude
    litellm_model: anthropic/claude-3-5-haiku-latest
    api_key_env: TEST_ANTHROPIC_KEY
  - name: llama
    litellm_model: hosted_vllm/meta-llama/Llama-3.1-8B-Instruct
    base_url: http://vllm:8000/v1
limits:
  max_body_bytes: 1000
timeouts:
  upstream_read: 30
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "toolgraph.yaml"
    path.write_text(text)
    return path


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_OPENAI_KEY", "sk-openai-test-key-1")
    monkeypatch.setenv("TEST_ANTHROPIC_KEY", "sk-ant-test-key-22")


def test_defaults_need_nothing() -> None:
    settings = load_settings()
    assert (settings.host, settings.port) == ("127.0.0.1", 8000)
    assert settings.upstream_base_url == "https://api.openai.com/v1"
    assert settings.redis_url is None
    assert settings.models == []


@pytest.mark.usefixtures("keys")
def test_yaml_then_env_then_overrides(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, ROUTES)
    from_file = load_settings(path)
    assert from_file.port == 9001
    assert from_file.limits.max_body_bytes == 1000
    assert from_file.timeouts.upstream_read == 30
    assert from_file.timeouts.upstream_connect == 10  # default kept beside a set sibling

    monkeypatch.setenv("TOOLGRAPH_PORT", "9002")
    monkeypatch.setenv("TOOLGRAPH_LIMITS__MAX_BODY_BYTES", "2000")
    monkeypatch.setenv("TOOLGRAPH_REDIS_URL", "redis://cache:6379/0")
    from_env = load_settings(path)
    assert from_env.port == 9002
    assert from_env.limits.max_body_bytes == 2000
    assert from_env.redis_url == "redis://cache:6379/0"
    assert from_env.upstream_base_url == "http://upstream.example:8000/v1"

    assert load_settings(path, port=9003, host=None).port == 9003

    monkeypatch.setenv("TOOLGRAPH_CONFIG", str(path))
    assert load_settings().models[0].name == "fast"


@pytest.mark.usefixtures("keys")
def test_routes_resolve_to_relay_or_litellm(tmp_path: Path) -> None:
    router = ModelRouter(load_settings(write(tmp_path, ROUTES)))

    fast = router.resolve("fast")
    assert (fast.via, fast.model, fast.api_key) == ("relay", "gpt-4o-mini", "sk-openai-test-key-1")
    claude = router.resolve("claude")
    assert (claude.via, claude.litellm_model) == ("litellm", "anthropic/claude-3-5-haiku-latest")
    llama = router.resolve("llama")
    assert (llama.via, llama.model) == ("relay", "meta-llama/Llama-3.1-8B-Instruct")
    unknown = router.resolve("gpt-5")
    assert (unknown.via, unknown.model, unknown.base_url) == (
        "relay",
        "gpt-5",
        "http://upstream.example:8000/v1",
    )
    assert router.has_litellm_routes()


def test_upstream_model_catches_unrouted_names(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLGRAPH_UPSTREAM_MODEL", "hosted_vllm/qwen")
    monkeypatch.setenv("TOOLGRAPH_UPSTREAM_API_KEY", "sk-default-key-3")
    target = ModelRouter(load_settings()).resolve("anything")
    assert (target.model, target.api_key, target.via) == ("qwen", "sk-default-key-3", "relay")


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("prot: 8000\n", "prot"),
        ("port: eighty\n", "port (or TOOLGRAPH_PORT)"),
        ("limits:\n  max_body_bytes: -1\n", "limits.max_body_bytes"),
        ("limits:\n  max_bodies: 5\n", "limits.max_bodies"),
        ("upstream_base_url: ftp://x\n", "upstream_base_url"),
        ("models:\n  - name: a\n", "models.0.litellm_model"),
        ("models:\n  - {name: a, litellm_model: openai/x}\n  - {name: a, litellm_model: openai/y}\n", "models"),
        ("models:\n  - {name: a, litellm_model: openai/x, api_key_env: NOT_SET_ANYWHERE}\n", "models.0.api_key_env"),
        ("mcp_servers:\n  - {name: a, url: http://h/mcp}\n  - {name: a, command: [x]}\n", "mcp_servers"),
        ("packs:\n  database:\n    - {name: a, url: sqlite:///a.db}\n    - {name: a, url: sqlite:///b.db}\n", "packs.database"),
        ("packs:\n  knowledge_graph:\n    - {name: a, path: demo}\n    - {name: a, path: b.ttl}\n", "packs.knowledge_graph"),
    ],
)  # fmt: skip
def test_bad_settings_name_the_key(tmp_path: Path, text: str, named: str) -> None:
    with pytest.raises(ConfigError) as raised:
        load_settings(write(tmp_path, text))
    message = str(raised.value)
    assert f" {named}:" in message or f" {named} (or TOOLGRAPH_" in message


def test_unknown_env_variable_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLGRAPH_UPSTREAM_BASEURL", "http://x")
    with pytest.raises(ConfigError, match="TOOLGRAPH_UPSTREAM_BASEURL: unknown setting"):
        load_settings()


def test_bad_env_value_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLGRAPH_TIMEOUTS__REQUEST", "soon")
    with pytest.raises(ConfigError, match=r"timeouts\.request \(or TOOLGRAPH_TIMEOUTS__REQUEST\)"):
        load_settings()


@pytest.mark.parametrize("value", ["coverag", "no/such/weights.json", "."])
def test_gate_weights_are_a_name_or_a_file(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("TOOLGRAPH_RETRIEVER__GATE_WEIGHTS", value)
    with pytest.raises(ConfigError) as raised:
        load_settings()
    assert str(raised.value) == (
        "invalid settings: retriever.gate_weights (or TOOLGRAPH_RETRIEVER__GATE_WEIGHTS): "
        "Value error, must be `shipped`, `coverage` or the path of a gate weights file "
        f"(python -m retriever.gate --out FILE), got {value!r}"
    )


def test_gate_weights_take_a_name_or_a_file(tmp_path: Path) -> None:
    assert load_settings().retriever.gate_weights == "shipped"
    coverage = load_settings(retriever={"gate_weights": "coverage"})
    assert coverage.retriever.gate_weights == "coverage"
    path = tmp_path / "weights.json"
    path.write_text("{}")
    a_file = load_settings(retriever={"gate_weights": str(path)})
    assert a_file.retriever.gate_weights == path


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("port: 1\nhost: [x\nlog_level: info\n", "line 3: not valid YAML"),
        ("- 1\n- 2\n", "must be a mapping"),
    ],
)
def test_unreadable_files_are_named(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_settings(write(tmp_path, text))
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_settings(tmp_path / "missing.yaml")


def test_secret_values_are_never_in_the_message(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLGRAPH_MASTER_KEY", "")
    monkeypatch.setenv("TOOLGRAPH_PORT", "x")
    monkeypatch.setenv("TOOLGRAPH_UPSTREAM_API_KEY", "sk-very-secret-value")
    with pytest.raises(ConfigError) as raised:
        load_settings()
    assert "sk-very-secret-value" not in str(raised.value)


def test_cli_exits_non_zero_with_one_readable_line(tmp_path: Path) -> None:
    path = write(tmp_path, "port: eighty\n")
    result = subprocess.run(
        [sys.executable, "-m", "proxy", "serve", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("toolgraph: invalid settings")
    assert "port (or TOOLGRAPH_PORT)" in lines[0]


def test_non_json_list_in_env_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLGRAPH_MODELS", "not json")
    with pytest.raises(ConfigError, match="TOOLGRAPH_MODELS: must be JSON"):
        load_settings()


def test_onnx_exports_go_to_one_cache_for_every_data_folder_unless_placed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TOOLGRAPH_RETRIEVER__ONNX_DIR")  # the test session's shared folder
    settings = load_settings(write(tmp_path, f"data_dir: {tmp_path / 'data'}\n"))
    assert settings.retriever.onnx_dir is None
    other = load_settings(write(tmp_path, f"data_dir: {tmp_path / 'other'}\n"))
    assert settings.retriever.onnx_folder() == other.retriever.onnx_folder()
    assert other.retriever.onnx_folder() == retriever.config.default_onnx_dir()
    placed = load_settings(
        write(tmp_path, f"data_dir: {tmp_path / 'data'}\nretriever:\n  onnx_dir: {tmp_path}\n")
    )
    assert placed.retriever.onnx_dir == tmp_path


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ("{name: geo}", "give exactly one of path and url"),
        ("{name: geo, path: demo, url: 'http://h/sparql'}", "give exactly one of path and url"),
        ("{name: geo, kind: bolt, path: demo}", "a bolt graph has a url, not a path"),
        ("{name: geo, kind: bolt, url: 'http://h:7474'}", "bolt needs a bolt:// or neo4j:// url"),
        ("{name: geo, url: 'bolt://h:7687'}", r"a SPARQL endpoint is an http\(s\) url"),
    ],
)
def test_a_knowledge_graph_names_what_is_wrong_with_its_source(
    tmp_path: Path, entry: str, says: str
) -> None:
    with pytest.raises(
        ConfigError, match=f"packs.knowledge_graph.0: .*knowledge graph geo: {says}"
    ):
        load_settings(write(tmp_path, f"packs:\n  knowledge_graph:\n    - {entry}\n"))


def test_a_bolt_password_is_a_secret(tmp_path: Path) -> None:
    text = (
        "packs:\n  knowledge_graph:\n    - {name: g, kind: bolt, url: 'bolt://u:s3cr%21t@h/db'}\n"
    )
    assert "s3cr!t" in load_settings(write(tmp_path, text)).secrets()


def test_the_planner_profile_fills_what_the_configuration_leaves_unset() -> None:
    small = PlannerSettings()
    assert (small.profile, small.triage, small.pick, small.reflection_rounds) == (
        "small", True, "confident", 0,
    )  # fmt: skip
    full = PlannerSettings(profile="full")
    assert (full.triage, full.pick, full.reflection_rounds) == (False, "llm", 2)
    mixed = PlannerSettings(profile="full", pick="first")
    assert (mixed.triage, mixed.pick) == (False, "first")


def test_a_routes_profile_keeps_the_explicit_planner_settings() -> None:
    config = PlannerSettings(reflection_rounds=1, top_k=7)
    routed = config.for_profile("full")
    assert (routed.profile, routed.triage, routed.pick) == ("full", False, "llm")
    assert (routed.reflection_rounds, routed.top_k) == (1, 7)
    assert config.for_profile(None) is config
    assert config.for_profile("small") is config


def test_a_route_carries_its_planner_profile_to_its_target() -> None:
    settings = load_settings(
        upstream_base_url="http://127.0.0.1:9/v1",
        models=[
            {"name": "big", "litellm_model": "openai/gpt-4o", "planner": "full"},
            {"name": "tiny", "litellm_model": "openai/qwen2.5-1.5b"},
        ],
    )
    router = ModelRouter(settings)
    assert router.resolve("big").planner == "full"
    assert router.resolve("tiny").planner is None  # planner.profile decides
    with pytest.raises(ConfigError, match="planner"):
        load_settings(models=[{"name": "x", "litellm_model": "openai/x", "planner": "huge"}])
