"""The MCP bench's call measurement runs against the tests' server over stdio and over
streamable HTTP on loopback (``python -m eval.bench_mcp``)."""

from __future__ import annotations

from pathlib import Path

from eval.bench_mcp import measure_calls, measure_http_calls, stdio_pair

FIGURES = ("direct_p50_ms", "direct_p99_ms", "toolgraph_p50_ms", "toolgraph_p99_ms")


async def test_calls_are_measured_both_ways_over_streamable_http(tmp_path: Path) -> None:
    measured = await measure_http_calls(3, tmp_path)
    assert all(measured[f"http_{figure}"] > 0 for figure in FIGURES), measured
    assert "http_added_p50_ms" in measured


async def test_calls_are_measured_both_ways_over_stdio(tmp_path: Path) -> None:
    measured = await measure_calls(3, tmp_path, *stdio_pair(), "stdio")
    assert all(measured[figure] > 0 for figure in FIGURES), measured
