"""The load benchmark runs end to end in its quick mode: every scenario answers.

No figure is checked against a target here (a few requests on a shared machine
say nothing about load); what fails this test is a script that no longer runs,
starts its servers, or counts what it sends.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(900)  # four proxies start, three loading the catalog: minutes under load
def test_the_quick_mode_runs_every_scenario_and_writes_its_results(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "eval.bench_load", "--quick", "--out", str(tmp_path)],
        cwd=ROOT,
        env=os.environ | {"PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"},
        capture_output=True,
        text=True,
        timeout=840,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    results = json.loads((tmp_path / "bench_load.json").read_text())
    for letter in "abcd":
        assert results[letter]["answered"] > 0, results[letter]
        assert results[letter]["requests"] >= results[letter]["answered"]
    assert results["c"]["rss"]["after_second_half"]["mib"] > 0
    assert "redis_back_s" in results["b"]["redis"]
    assert results["d"]["alone"]["answered"] > 0
    assert results["d"]["hostile"]["requests"] > 0
    assert {check["target"][0] for check in results["checks"]} == {"A", "B", "C", "D"}
    assert (tmp_path / "bench_load.png").stat().st_size > 0
    assert "| A: orchestrate |" in (tmp_path / "bench_load.md").read_text()
