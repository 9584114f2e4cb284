"""The servers the overhead benchmark starts: the fake upstream, toolgraph, LiteLLM.

Each runs as a subprocess on a free loopback port with its output in a log file,
is ready once its health endpoint answers 200, and is stopped (SIGTERM, then
SIGKILL) when the benchmark ends, however it ends. LiteLLM's proxy lives in a
virtual environment of its own, created on first use and reused after.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

LITELLM_VERSION = "1.106.2"  # the version toolgraph itself pins
MODEL = "gpt-4o-mini"  # what the client sends; every path passes it on unchanged
UPSTREAM_KEY = "sk-bench"
PIP_INSTALL_TIMEOUT_SECONDS = 20 * 60


class ServiceError(Exception):
    """A server that could not be installed, started or made ready.

    The message is one line; ``detail`` holds the end of its log or of pip's output.
    """

    def __init__(self, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.detail = detail


def process_cpu_seconds(pid: int) -> float:
    """User and system CPU seconds of ``pid`` and its live descendants (Linux ``/proc``)."""
    total = 0.0
    pending = [pid]
    while pending:
        current = pending.pop()
        try:
            fields = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
            tasks = list(Path(f"/proc/{current}/task").iterdir())
        except OSError:
            continue  # it ended between the listing and the read
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        for task in tasks:
            with contextlib.suppress(OSError):
                pending.extend(int(c) for c in (task / "children").read_text().split())
    return total


@dataclass(frozen=True)
class ServerSpec:
    """How to run one server: its command, what it changes in the inherited environment."""

    name: str
    port: int
    argv: list[str]
    env: dict[str, str]
    unset: tuple[str, ...]  # inherited variables (or prefixes ending in ``_``) to drop
    health_path: str
    ready_timeout: float

    def child_env(self, base: Mapping[str, str]) -> dict[str, str]:
        kept = {k: v for k, v in base.items() if not self._dropped(k)}
        return kept | self.env

    def describe(self, secret: str) -> dict[str, Any]:
        """The spec for the report, with ``secret`` shown as a placeholder."""
        return {
            "argv": self.argv,
            "env": {k: "<per-run master key>" if v == secret else v for k, v in self.env.items()},
            "unset": list(self.unset),
        }

    def _dropped(self, name: str) -> bool:
        return any(name.startswith(u) if u.endswith("_") else name == u for u in self.unset)


@dataclass
class Service:
    """A server process the benchmark started and must stop."""

    spec: ServerSpec
    log_path: Path
    process: subprocess.Popen[bytes]

    def stop(self) -> None:
        if self.process.poll() is not None:
            return
        # It runs in a session of its own, so this reaches uvicorn's workers too.
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)

    def log_tail(self, lines: int = 15) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


@contextlib.contextmanager
def running(spec: ServerSpec, base_env: Mapping[str, str], work_dir: Path) -> Iterator[Service]:
    """Start the server in a session of its own, and stop it on the way out, however left.

    It is not ready until :func:`wait_ready` says so.
    """
    log_dir = work_dir / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"{spec.name.replace(' ', '-')}.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            spec.argv,
            env=spec.child_env(base_env),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=work_dir,
            start_new_session=True,
        )
    service = Service(spec, log_path, process)
    try:
        yield service
    finally:
        service.stop()


def wait_ready(service: Service) -> None:
    """Poll the health endpoint until it answers 200: the server is another process."""
    spec = service.spec
    deadline = time.monotonic() + spec.ready_timeout
    while time.monotonic() < deadline:
        if service.process.poll() is not None:
            raise ServiceError(
                f"{spec.name} exited with status {service.process.returncode} "
                f"(its log: {service.log_path})",
                service.log_tail(),
            )
        if _answers_ok(spec.port, spec.health_path):
            return
        time.sleep(0.1)
    raise ServiceError(
        f"{spec.name} was not ready after {spec.ready_timeout:.0f} s (its log: {service.log_path})",
        service.log_tail(),
    )


def _answers_ok(port: int, path: str) -> bool:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
    try:
        connection.request("GET", path)
        return connection.getresponse().status == 200
    except OSError:
        return False
    finally:
        connection.close()


def fake_upstream_spec(port: int, delay_ms: float, root: Path) -> ServerSpec:
    return ServerSpec(
        name="fake upstream",
        port=port,
        argv=[
            *(sys.executable, "-m", "testing.fake_upstream"),
            *("--port", str(port), "--delay-ms", str(delay_ms)),
        ],
        env={"PYTHONPATH": str(root)},
        unset=(),
        health_path="/v1/models",
        ready_timeout=30,
    )


def toolgraph_spec(port: int, upstream_port: int, master_key: str, data_dir: Path) -> ServerSpec:
    """One worker relaying to the fake upstream; log level warning, so no line per request;
    no catalog loaded in the background, as a relay needs none."""
    return ServerSpec(
        name="toolgraph",
        port=port,
        argv=[str(Path(sys.executable).with_name("toolgraph")), "serve", "--port", str(port)],
        env={
            "TOOLGRAPH_UPSTREAM_BASE_URL": f"http://127.0.0.1:{upstream_port}/v1",
            "TOOLGRAPH_UPSTREAM_API_KEY": UPSTREAM_KEY,
            "TOOLGRAPH_MASTER_KEY": master_key,
            "TOOLGRAPH_LOG_LEVEL": "warning",
            "TOOLGRAPH_WORKERS": "1",
            "TOOLGRAPH_DATA_DIR": str(data_dir),
            "TOOLGRAPH_ORCHESTRATE__PRELOAD": "false",
        },
        unset=("TOOLGRAPH_",),
        # Ready, not just up: what it loads in the background at start-up (the embedding
        # model, the catalog) must not share the cores with the first cells measured.
        health_path="/readyz",
        ready_timeout=180,
    )


def baseline_spec(
    port: int, upstream_port: int, master_key: str, data_dir: Path, source: Path
) -> ServerSpec:
    """toolgraph as it was at another commit (a checkout in ``source``), set up like
    :func:`toolgraph_spec`; the checkout comes first on ``PYTHONPATH``, so its ``proxy``
    package is the one imported, with this venv's dependencies."""
    spec = toolgraph_spec(port, upstream_port, master_key, data_dir)
    return ServerSpec(
        name="baseline",
        port=port,
        argv=[sys.executable, "-m", "proxy", "serve", "--port", str(port)],
        env=spec.env | {"PYTHONPATH": str(source)},
        unset=(*spec.unset, "PYTHONPATH"),
        health_path=spec.health_path,
        ready_timeout=spec.ready_timeout,
    )


def baseline_checkout(root: Path, ref: str, folder: Path) -> str:
    """``ref`` checked out (detached) in ``folder``, a git worktree of ``root``; its full commit id.

    :class:`ServiceError` naming ``ref`` when git cannot resolve or check it out.
    """
    try:
        commit = _git(root, "rev-parse", "--verify", f"{ref}^{{commit}}")
        if (folder / ".git").exists():
            _git(folder, "checkout", "--quiet", "--detach", commit)
        else:
            _git(root, "worktree", "add", "--quiet", "--detach", str(folder), commit)
    except subprocess.CalledProcessError as exc:
        raise ServiceError(f"cannot check out the baseline {ref!r}", exc.stderr or "") from exc
    return commit


def _git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=True
    )
    return done.stdout.strip()


def litellm_config(upstream_port: int) -> dict[str, Any]:
    """Pass-through to the fake upstream, with work that toolgraph does not do turned off."""
    return {
        "model_list": [
            {
                "model_name": MODEL,
                "litellm_params": {
                    "model": f"openai/{MODEL}",
                    "api_base": f"http://127.0.0.1:{upstream_port}/v1",
                    "api_key": UPSTREAM_KEY,
                },
            }
        ],
        "litellm_settings": {
            "turn_off_message_logging": True,
            "disable_end_user_cost_tracking": True,
        },
        "general_settings": {
            "disable_spend_logs": True,
            "disable_error_logs": True,
            "background_health_checks": False,
        },
    }


def litellm_spec(port: int, venv: Path, config_path: Path, master_key: str) -> ServerSpec:
    """One worker; no database (so no key or spend tables), error-level logs only."""
    return ServerSpec(
        name="litellm",
        port=port,
        argv=[
            *(str(venv / "bin" / "litellm"), "--config", str(config_path)),
            *("--host", "127.0.0.1", "--port", str(port)),
            *("--num_workers", "1", "--telemetry", "False"),
        ],
        env={
            "LITELLM_MASTER_KEY": master_key,  # it refuses to start without one
            "LITELLM_LOG": "ERROR",
            "LITELLM_MODE": "PRODUCTION",  # do not read a .env file
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        },
        unset=("DATABASE_URL", "REDIS_URL", "REDIS_HOST", "LITELLM_"),
        health_path="/health/liveliness",
        ready_timeout=180,
    )


def write_litellm_config(config: Mapping[str, Any], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(dict(config), sort_keys=False), encoding="utf-8")
    return path


def ensure_litellm_venv(venv: Path, on_output: Callable[[str], None]) -> None:
    """Create ``venv`` with ``litellm[proxy]`` at the pinned version, unless it has it.

    Raises :class:`ServiceError` with pip's last lines when the install fails.
    """
    if installed_litellm_version(venv) == LITELLM_VERSION:
        return
    if not (venv / "bin" / "python").exists():
        _run_streaming([sys.executable, "-m", "venv", "--clear", str(venv)], on_output)
        _run_streaming(
            [str(venv / "bin" / "python"), "-m", "pip", "install", "--upgrade", "pip"], on_output
        )
    _run_streaming(
        [
            str(venv / "bin" / "python"),
            "-m",
            "pip",
            "install",
            f"litellm[proxy]=={LITELLM_VERSION}",
        ],
        on_output,
    )
    if installed_litellm_version(venv) != LITELLM_VERSION:
        raise ServiceError(f"pip finished but litellm {LITELLM_VERSION} is not in {venv}")


def installed_litellm_version(venv: Path) -> str | None:
    python = venv / "bin" / "python"
    if not python.exists() or not (venv / "bin" / "litellm").exists():
        return None
    result = subprocess.run(
        [str(python), "-c", "import importlib.metadata as m; print(m.version('litellm'))"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return result.stdout.strip() if result.returncode == 0 else None


def _run_streaming(argv: list[str], on_output: Callable[[str], None]) -> None:
    """Run ``argv``, handing each output line to ``on_output``; raise if it fails."""
    deadline = time.monotonic() + PIP_INSTALL_TIMEOUT_SECONDS
    tail: list[str] = []
    with subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True
    ) as process:
        assert process.stdout is not None
        for line in process.stdout:
            tail = [*tail[-7:], line.rstrip()[:300]]
            on_output(line.rstrip())
            if time.monotonic() > deadline:
                process.kill()
                raise ServiceError(
                    f"{' '.join(argv[2:])} took over {PIP_INSTALL_TIMEOUT_SECONDS} s",
                    "\n".join(tail),
                )
        status = process.wait()
    if status != 0:
        errors = [line for line in tail if line.startswith("ERROR")] or tail or ["no output"]
        raise ServiceError(f"{' '.join(argv[2:])} failed: {errors[-1]}", "\n".join(tail))
