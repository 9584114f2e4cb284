"""Start-up time and memory of ``toolgraph serve --workers N`` with the embedded stores.

Each run starts the real CLI with the catalog preloaded (every worker loads the
embedding model, claims its Qdrant folder and indexes the catalog before it serves),
on a fresh data directory and then again on the same one, and reports the seconds
until every worker holds its folder, each serving process's RSS (Linux), and how many
workers uvicorn's supervisor replaced on the way (a worker that missed its health check,
one still loading on a busy host, is killed and started again: the log says so)::

    python -m eval.bench_workers --workers 1 2 [--burn 4]

``--burn K`` runs K processes that spin on a core for the whole measurement (started
and stopped here), to measure a busy host: the load average before and after is
printed with each line.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from testing.ports import free_port


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--burn", type=int, default=0, help="CPU-spinning processes to run")
    args = parser.parse_args()
    burners = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.burn)
    ]
    try:
        for workers in args.workers:
            with tempfile.TemporaryDirectory(prefix="toolgraph-workers-") as data:
                for start in ("fresh", "again"):
                    before = os.getloadavg()[0]
                    seconds, rss, replaced = measure(workers, Path(data), args.timeout)
                    print(
                        f"workers={workers} {start}: all ready in {seconds:.1f} s, "
                        f"RSS MiB per process {[round(r) for r in rss]}, total {sum(rss):.0f}, "
                        f"workers replaced {replaced}, load average {before:.1f} -> "
                        f"{os.getloadavg()[0]:.1f} ({args.burn} burners)"
                    )
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()


def measure(workers: int, data: Path, timeout: float) -> tuple[float, list[float], int]:
    env = {
        **os.environ,
        "TOOLGRAPH_DATA_DIR": str(data),
        "TOOLGRAPH_ORCHESTRATE__PRELOAD": "true",
        "TOOLGRAPH_UPSTREAM_BASE_URL": "http://127.0.0.1:9/v1",
    }
    command = [sys.executable, "-m", "proxy", "serve", "--port", str(free_port())]
    began = time.monotonic()
    log = data / "serve.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            [*command, "--workers", str(workers)], env=env, stdout=out, stderr=out
        )
    try:
        while held(data, workers) < workers:
            if process.poll() is not None or time.monotonic() - began > timeout:
                raise SystemExit(f"toolgraph with {workers} workers did not come up")
            time.sleep(0.05)
        seconds = time.monotonic() - began
        return seconds, serving_rss(process.pid, workers), replaced(log)
    finally:
        process.terminate()
        process.wait(60)


def replaced(log: Path) -> int:
    """Workers the supervisor killed and started again ("Child process [N] died")."""
    return log.read_text(errors="replace").count("] died")


def held(data: Path, workers: int) -> int:
    """How many workers hold a folder with their plan memory in it (made after the
    catalog's index, the last step of a worker's start-up)."""
    count = 0
    for slot in range(workers):
        name = "qdrant" if slot == 0 else f"qdrant-{slot}"
        ready = (data / name / "collection" / "plan_memory").is_dir()
        count += ready and locked(data / f"{name}.lock")
    return count


def locked(path: Path) -> bool:
    with path.open("a") as file:
        try:
            fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(file, fcntl.LOCK_UN)
        return False


def serving_rss(pid: int, workers: int) -> list[float]:
    """The RSS of each process that serves (from ``/proc``): the CLI itself for one
    worker, else the workers uvicorn spawned."""
    if workers == 1:
        pids = [pid]
    else:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        pids = [
            int(c) for c in children if b"spawn_main" in Path(f"/proc/{c}/cmdline").read_bytes()
        ]
    return sorted(rss_mib(p) for p in pids)


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise SystemExit(f"no RSS for process {pid}")


if __name__ == "__main__":
    main()
