"""Start :mod:`eval.llm.server` from ``.bench/llama-venv`` for an eval, stop it after.

``eval/llm/setup.sh`` creates the venv and the model file this expects.
"""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from testing.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / ".bench" / "llama-venv"
MODEL = ROOT / ".bench" / "models" / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
MODEL_NAME = "qwen2.5-coder-1.5b"
LOG = ROOT / ".bench" / "llm-server.log"
START_TIMEOUT = 300.0  # seconds: loading 1.1 GB on a busy machine


@contextmanager
def local_model(n_ctx: int, threads: int = 2) -> Iterator[str]:
    """The model served on a free port; yields its base URL (ending in ``/v1``)."""
    python = VENV / "bin" / "python"
    if not python.exists() or not MODEL.exists():
        raise SystemExit("no local model: run eval/llm/setup.sh (or make llm) first")
    port = free_port()
    LOG.parent.mkdir(parents=True, exist_ok=True)
    with LOG.open("w") as log:
        process = subprocess.Popen(
            [str(python), "-m", "eval.llm.server", "--model", str(MODEL), "--name", MODEL_NAME,
             "--port", str(port), "--n-ctx", str(n_ctx), "--threads", str(threads)],
            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            _wait_for(port, process)
            yield f"http://127.0.0.1:{port}/v1"
        finally:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:  # it finishes the reply it is decoding first
                process.kill()
                process.wait(10)


def _wait_for(port: int, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the model server did not start; see {LOG}") from None
            time.sleep(0.5)
