"""The database benchmark runs end to end on a small table and writes its report."""

from __future__ import annotations

import json
from pathlib import Path

from eval.bench_database import CALLS, main


def test_the_benchmark_times_every_tool_on_both_engines(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    assert main(["--rows", "2000", "--repeat", "1", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["rows"] == 2000
    for engine in ("sqlite", "postgresql"):
        assert len(report["median_ms"][engine]) == len(CALLS)
        assert all(ms > 0 for ms in report["median_ms"][engine].values())
