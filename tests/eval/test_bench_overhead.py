"""The overhead benchmark's pure parts: the response reader, the figures, the checks.

Nothing here is timed; the reader's clock is a counter.
"""

from __future__ import annotations

import asyncio
import http.client
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from eval import _bench_report as report
from eval import _bench_services as services
from eval._bench_client import (
    Endpoint,
    ProtocolError,
    Response,
    Samples,
    build_request,
    is_complete,
    parse_head,
    read_response,
)
from eval._bench_report import CellKey, Summary
from eval.bench_overhead import RESPONSES_PATH, request_body
from testing.fake_upstream import FakeUpstream


def _reader(*pieces: bytes) -> asyncio.StreamReader:
    reader = asyncio.StreamReader()
    for piece in pieces:
        reader.feed_data(piece)
    reader.feed_eof()
    return reader


CHUNKED = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
    b'f\r\ndata: {"a":1}\n\n\r\n'
    b"f\r\ndata: [DONE]\n\n\n\r\n"
    b"0\r\n\r\n"
)


async def test_reads_a_content_length_response_and_leaves_the_next_one() -> None:
    first = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A: b\r\n\r\nhello"
    second = b"HTTP/1.1 404 Not Found\r\ncontent-length: 2\r\n\r\nno"
    reader = _reader(first + second)
    one = await read_response(reader, lambda: 7.0)
    two = await read_response(reader, lambda: 8.0)
    assert (one.status, one.headers["x-a"], one.body, one.first_body_at) == (
        200,
        "b",
        b"hello",
        7.0,
    )
    assert (two.status, two.body) == (404, b"no")


async def test_reads_chunks_split_at_every_byte() -> None:
    reader = _reader(*(CHUNKED[i : i + 1] for i in range(len(CHUNKED))))
    response = await read_response(reader, lambda: 1.0)
    assert response.body == b'data: {"a":1}\n\ndata: [DONE]\n\n\n'
    assert await reader.read() == b""  # nothing of the terminal chunk is left behind


async def test_first_body_byte_is_stamped_at_the_first_chunk_not_the_last() -> None:
    ticks = iter([10.0, 20.0, 30.0])
    response = await read_response(_reader(CHUNKED), lambda: next(ticks))
    assert response.first_body_at == 10.0


async def test_reads_chunk_extensions_and_trailers() -> None:
    raw = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"3;name=value\r\nabc\r\n0\r\nx-trailer: 1\r\n\r\n"
        b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n"
    )
    reader = _reader(raw)
    assert (await read_response(reader)).body == b"abc"
    empty = await read_response(reader)
    assert (empty.body, empty.first_body_at) == (b"", None)


@pytest.mark.parametrize("cut", [len(b"0\r\n\r\n"), len(b"[DONE]\n\n\n\r\n0\r\n\r\n")])
async def test_a_stream_cut_before_its_terminal_chunk_is_an_error(cut: int) -> None:
    with pytest.raises(asyncio.IncompleteReadError):
        await read_response(_reader(CHUNKED[:-cut]))


@pytest.mark.parametrize(
    "raw",
    [
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n",
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabcXY0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\nbody",
        b"SSH-2.0-OpenSSH\r\n\r\n",
    ],
)
async def test_unreadable_responses_raise_protocol_error(raw: bytes) -> None:
    with pytest.raises(ProtocolError):
        await read_response(_reader(raw))


def test_parse_head_lowercases_header_names() -> None:
    status, headers = parse_head(b"HTTP/1.1 429 Too Many\r\nRetry-After: 1\r\n\r\n")
    assert (status, headers) == (429, {"retry-after": "1"})


def test_build_request_declares_the_body_length() -> None:
    raw = build_request(Endpoint("127.0.0.1", 9), b'{"x":1}', {"authorization": "Bearer k"})
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"POST /v1/chat/completions HTTP/1.1\r\n")
    assert b"content-length: 7" in head
    assert b"authorization: Bearer k" in head
    assert body == b'{"x":1}'


@pytest.mark.parametrize(
    ("status", "body", "stream", "complete"),
    [
        (200, b'{"choices":[]}', False, True),
        (200, b'{"error":{}}', False, False),
        (500, b'{"choices":[]}', False, False),
        (200, b"data: {}\n\ndata: [DONE]\n\n", True, True),
        (200, b"data: {}\n\n", True, False),
        (200, b'{"id":"resp_1","object":"response"}', False, True),
        (200, b"event: response.completed\ndata: {}\n\n", True, True),
        (200, b"event: response.failed\ndata: {}\n\n", True, False),
    ],
)
def test_is_complete(status: int, body: bytes, stream: bool, complete: bool) -> None:
    assert is_complete(Response(status, {}, body, None), stream) is complete


def test_the_request_body_is_a_small_chat_that_asks_for_usage_when_streaming() -> None:
    plain, streamed = orjson.loads(request_body(False)), orjson.loads(request_body(True))
    assert [m["role"] for m in plain["messages"]] == ["system", "user"]
    assert "stream" not in plain
    assert streamed["stream_options"] == {"include_usage": True}


def test_the_responses_body_asks_the_same_question_and_keeps_the_default_store() -> None:
    chat = orjson.loads(request_body(False))
    plain = orjson.loads(request_body(False, RESPONSES_PATH))
    streamed = orjson.loads(request_body(True, RESPONSES_PATH))
    assert [plain["instructions"], plain["input"]] == [m["content"] for m in chat["messages"]]
    assert plain["max_output_tokens"] == chat["max_tokens"]
    assert "stream" not in plain
    assert "store" not in plain
    assert streamed["stream"] is True


@pytest.mark.parametrize(
    ("q", "expected"),
    [(0, 1.0), (50, 5.5), (90, 9.1), (99, 9.91), (100, 10.0)],
)
def test_percentile_interpolates_between_ranks(q: float, expected: float) -> None:
    values = [10.0, 3.0, 1.0, 8.0, 2.0, 7.0, 5.0, 4.0, 9.0, 6.0]  # unsorted on purpose
    assert report.percentile(values, q) == pytest.approx(expected)


def test_percentile_of_one_value_and_of_none() -> None:
    assert report.percentile([4.0], 99) == 4.0
    with pytest.raises(ValueError, match="no values"):
        report.percentile([], 50)
    with pytest.raises(ValueError, match="outside"):
        report.percentile([1.0], 101)


def test_summarize_in_milliseconds_and_requests_per_second() -> None:
    samples = Samples(latencies=[0.020] * 99 + [0.120], first_byte=[0.010] * 100, elapsed=2.0)
    summary = report.summarize(samples)
    assert summary is not None
    assert summary.p50_ms == pytest.approx(20.0)
    assert summary.p99_ms == pytest.approx(21.0)  # one slow request in a hundred
    assert summary.first_byte_p50_ms == pytest.approx(10.0)
    assert summary.requests_per_second == pytest.approx(50.0)
    assert report.summarize(Samples(errors=3)) is None


def _summary(p50: float, p99: float, rps: float = 100.0, errors: int = 0) -> Summary:
    return Summary(100, errors, None, p50, p99, None, None, rps)


def test_added_latency_subtracts_the_direct_path_percentile_by_percentile() -> None:
    assert report.added_latency(_summary(21.5, 25.0), _summary(20.0, 24.0)) == (1.5, 1.0)
    assert report.added_latency(None, _summary(20.0, 24.0)) is None


def _cells(
    toolgraph_low: tuple[float, float],
    toolgraph_high: tuple[float, float, float],
    litellm_high: tuple[float, float, float] | None,
) -> dict[CellKey, Summary | None]:
    cells: dict[CellKey, Summary | None] = {}
    for stream in (False, True):
        cells[CellKey(1, stream, "direct")] = _summary(20.0, 22.0)
        cells[CellKey(1, stream, "toolgraph")] = _summary(
            20 + toolgraph_low[0], 22 + toolgraph_low[1]
        )
        cells[CellKey(64, stream, "direct")] = _summary(20.0, 30.0, rps=3000)
        p50, p99, rps = toolgraph_high
        cells[CellKey(64, stream, "toolgraph")] = _summary(20 + p50, 30 + p99, rps)
        if litellm_high is None:
            cells[CellKey(64, stream, "litellm")] = None
        else:
            p50, p99, rps = litellm_high
            cells[CellKey(64, stream, "litellm")] = _summary(20 + p50, 30 + p99, rps)
    return cells


def _statuses(checks: list[report.Check]) -> dict[tuple[str, str], str]:
    return {(c.name.split(" <=")[0].split(" >=")[0], c.mode): c.status for c in checks}


def test_targets_pass_when_every_limit_is_met() -> None:
    checks = report.check_targets(_cells((0.9, 2.9), (5, 40, 800), (300, 500, 200)))
    assert {c.status for c in checks} == {"pass"}


def test_each_target_misses_on_its_own_figure() -> None:
    statuses = _statuses(report.check_targets(_cells((1.1, 3.1), (5, 60, 700), (300, 500, 200))))
    assert statuses[("added p50 at c=1", "non-stream")] == "miss"
    assert statuses[("added p99 at c=1", "stream")] == "miss"
    assert statuses[("added p99 at c=64", "stream")] == "miss"  # 60 > 0.1 x 500
    assert statuses[("req/s per worker at c=64", "non-stream")] == "miss"  # 700 < 4 x 200


def test_targets_against_litellm_are_not_measured_without_it() -> None:
    statuses = _statuses(report.check_targets(_cells((0.5, 1.0), (5, 10, 800), None)))
    assert statuses[("added p99 at c=64", "stream")] == "not measured"
    assert statuses[("req/s per worker at c=64", "non-stream")] == "not measured"
    assert statuses[("added p50 at c=1", "stream")] == "pass"


def test_a_failed_toolgraph_request_misses_its_check() -> None:
    cells = _cells((0.5, 1.0), (5, 10, 800), (300, 500, 200))
    cells[CellKey(1, True, "toolgraph")] = _summary(20.5, 23.0, errors=2)
    checks = report.check_targets(cells)
    assert [c.status for c in checks if c.name == "no failed toolgraph requests"] == ["miss"]


def test_cells_json_orders_targets_and_marks_the_unmeasured() -> None:
    rows = report.cells_json(_cells((0.5, 1.0), (5, 10, 800), None))
    assert [r["target"] for r in rows[:3]] == ["direct", "toolgraph", "direct"]
    litellm = [r for r in rows if r["target"] == "litellm"]
    assert len(litellm) == 2
    assert not any(r["measured"] for r in litellm)
    toolgraph = next(r for r in rows if r["target"] == "toolgraph")
    assert toolgraph["added_ms"] == {"p50": pytest.approx(0.5), "p99": pytest.approx(1.0)}


def _with_responses(cells: dict[CellKey, Summary | None]) -> dict[CellKey, Summary | None]:
    for stream in (False, True):
        cells[CellKey(1, stream, "responses translated")] = _summary(23.0, 26.0)
        cells[CellKey(1, stream, "direct responses")] = _summary(21.0, 23.0)
        cells[CellKey(1, stream, "responses relayed")] = _summary(22.0, 25.0)
    return cells


def test_relayed_responses_are_measured_against_the_upstreams_own_responses() -> None:
    cells = _with_responses(_cells((0.5, 1.0), (5, 10, 800), None))
    rows = {(r["target"], r["concurrency"], r["stream"]): r for r in report.cells_json(cells)}
    assert rows["responses translated", 1, False]["added_ms"] == {"p50": 3.0, "p99": 4.0}
    assert rows["responses relayed", 1, False]["added_ms"] == {"p50": 1.0, "p99": 2.0}
    assert rows["direct responses", 1, False]["added_ms"] is None
    order = [r["target"] for r in report.cells_json(cells) if r["concurrency"] == 1][:5]
    assert order == ["direct", "toolgraph", "responses translated", "direct responses",
                     "responses relayed"]  # fmt: skip


def test_a_failed_responses_request_misses_the_no_failures_check() -> None:
    cells = _with_responses(_cells((0.5, 1.0), (5, 10, 800), (300, 500, 200)))
    cells[CellKey(1, True, "responses relayed")] = _summary(22.0, 25.0, errors=1)
    checks = report.check_targets(cells)
    assert [c.status for c in checks if c.name == "no failed toolgraph requests"] == ["miss"]


def test_the_plot_is_written(tmp_path: Path) -> None:
    path = tmp_path / "plot.png"
    cells = _with_responses(_cells((0.5, 1.0), (5, 10, 800), (300, 500, 200)))
    report.plot_added(cells, path, "test")
    assert path.read_bytes().startswith(b"\x89PNG")


def test_server_specs_drop_inherited_settings_of_their_own_kind(tmp_path: Path) -> None:
    base = {"PATH": "/bin", "TOOLGRAPH_MASTER_KEY": "old", "TOOLGRAPH_X": "1", "DATABASE_URL": "pg"}
    toolgraph = services.toolgraph_spec(1, 2, "sk-new", tmp_path)
    env = toolgraph.child_env(base)
    assert env["TOOLGRAPH_MASTER_KEY"] == "sk-new"
    assert "TOOLGRAPH_X" not in env
    assert env["TOOLGRAPH_UPSTREAM_BASE_URL"] == "http://127.0.0.1:2/v1"
    litellm = services.litellm_spec(3, tmp_path, tmp_path / "c.yaml", "sk-new")
    assert "DATABASE_URL" not in litellm.child_env(base)
    assert litellm.describe("sk-new")["env"]["LITELLM_MASTER_KEY"] == "<per-run master key>"


def test_the_baseline_runs_its_own_checkout_with_the_same_settings(tmp_path: Path) -> None:
    base = {"PATH": "/bin", "PYTHONPATH": "/elsewhere", "TOOLGRAPH_X": "1"}
    spec = services.baseline_spec(1, 2, "sk-new", tmp_path / "data", tmp_path / "old")
    env = spec.child_env(base)
    assert env["PYTHONPATH"] == str(tmp_path / "old")
    assert "TOOLGRAPH_X" not in env
    assert env["TOOLGRAPH_UPSTREAM_BASE_URL"] == "http://127.0.0.1:2/v1"
    assert spec.argv[1:4] == ["-m", "proxy", "serve"]


_BURN = """
import subprocess, sys, time
if sys.argv[1] == "parent":  # the CPU is spent by a child, as uvicorn's workers spend it
    child = subprocess.Popen([sys.executable, "-c", sys.argv[2], "child", ""], stdout=sys.stdout)
    child.wait()
else:
    while time.process_time() < 0.4:  # /proc counts in 10 ms ticks: leave room
        pass
    print("burnt", flush=True)
    time.sleep(60)
"""


def test_server_cpu_counts_the_process_and_its_children() -> None:
    argv = [sys.executable, "-c", _BURN, "parent", _BURN]
    with subprocess.Popen(argv, stdout=subprocess.PIPE, text=True) as process:
        try:
            assert process.stdout is not None
            assert process.stdout.readline().strip() == "burnt"
            assert services.process_cpu_seconds(process.pid) >= 0.3
        finally:
            subprocess.run(["pkill", "-P", str(process.pid)], check=False)
            process.kill()
    assert services.process_cpu_seconds(process.pid) == 0.0  # gone: nothing to count


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def test_the_baseline_checkout_is_the_named_commit(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    for text in ("before", "after"):
        (repo / "version.txt").write_text(text)
        _git(repo, "add", ".")
        _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", text)
    folder = tmp_path / "baseline"
    commit = services.baseline_checkout(repo, "HEAD~1", folder)
    assert (folder / "version.txt").read_text() == "before"
    assert services.baseline_checkout(repo, "HEAD", folder) != commit
    assert (folder / "version.txt").read_text() == "after"
    with pytest.raises(services.ServiceError, match="no-such-ref"):
        services.baseline_checkout(repo, "no-such-ref", folder)
    assert (folder / "version.txt").read_text() == "after"


def test_the_baseline_sits_between_toolgraph_and_litellm() -> None:
    keys = [CellKey(1, False, t) for t in ("litellm", "baseline", "toolgraph", "direct")]
    assert [k.target for k in sorted(keys, key=CellKey.order)] == [
        "direct",
        "toolgraph",
        "baseline",
        "litellm",
    ]


def test_litellm_routes_the_same_model_name_to_the_fake_upstream() -> None:
    config = services.litellm_config(4321)
    (entry,) = config["model_list"]
    assert entry["model_name"] == services.MODEL
    assert entry["litellm_params"]["model"] == f"openai/{services.MODEL}"
    assert entry["litellm_params"]["api_base"] == "http://127.0.0.1:4321/v1"
    assert config["general_settings"]["disable_spend_logs"] is True


def test_the_benchmark_upstream_answers_and_records_nothing() -> None:
    fake = FakeUpstream(record=False)
    fake.start()
    connection = http.client.HTTPConnection("127.0.0.1", fake.port, timeout=10)
    try:
        connection.request("POST", "/v1/chat/completions", request_body(True))
        response = connection.getresponse()
        assert response.status == 200
        assert response.read().endswith(b"data: [DONE]\n\n")
    finally:
        connection.close()
        fake.stop()
    assert fake.requests == []
