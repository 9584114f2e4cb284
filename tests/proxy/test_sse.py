"""The SSE framing: events written, cut back out of pieces, and read."""

from __future__ import annotations

from proxy import sse

STREAM = b'data: {"a":1}\n\n: keep-alive\n\ndata: {"b":\ndata: 2}\n\ndata: [DONE]\n\n'


def test_events_cut_anywhere_come_out_whole_and_unchanged() -> None:
    for size in range(1, len(STREAM) + 1):
        cutter = sse.EventCutter()
        pieces = [STREAM[i : i + size] for i in range(0, len(STREAM), size)]
        out = [cutter.feed(piece) for piece in pieces]
        assert all(events.endswith(b"\n\n") for events in out if events)
        assert b"".join(out) == STREAM
        assert cutter.rest() == b""


def test_a_last_event_without_its_blank_line_is_completed() -> None:
    cutter = sse.EventCutter()
    assert cutter.feed(b'data: {"a":1}\r\n\r\ndata: [DONE]') == b'data: {"a":1}\n\n'
    assert cutter.rest() == sse.DONE
    assert cutter.rest() == b""


def test_data_is_read_back_and_the_end_found() -> None:
    assert list(sse.data_fields(STREAM)) == [b'{"a":1}', b'{"b":\n2}', sse.DONE_DATA]
    assert sse.ends_stream(STREAM)
    assert not sse.ends_stream(sse.json_event({"text": "[DONE]"}))
    assert sse.json_event({"a": 1}) == b'data: {"a":1}\n\n'


def test_a_responses_stream_ends_at_its_last_event() -> None:
    delta = sse.named_event("response.output_text.delta", b'{"delta":"event: response.done"}')
    assert not sse.ends_stream(delta)
    for last in ("response.completed", "response.failed", "response.incomplete"):
        assert sse.ends_stream(delta + sse.named_event(last, b"{}"))
    assert not sse.ends_stream(sse.named_event("response.completed_soon", b"{}"))


def test_the_events_holding_a_marker_read_as_all_events_read() -> None:
    usage = b'"usage":{'
    streams = [
        STREAM,
        b'data: {"n":1,"usage":null}\n\ndata: {"n":2,"usage":{"total_tokens":3}}\n\n' + sse.DONE,
        # \r\n, a marker in a comment, in a multi-line event, twice in one event, at the
        # start and in the last event without its blank line; runs of blank lines
        b': "usage":{ a comment\r\n\r\ndata: {"usage":{"a":1},\r\ndata: "usage":{}}\r\n\r\n',
        b'data: "usage":{"usage":{\n\n\n\ndata: x\n\n\n: c\ndata:   "usage":{"b":2}',
        b"data: no marker here\n\n" + sse.DONE,
    ]
    for stream in streams:
        found = [data for data in sse.data_fields_with(stream, usage) if usage in data]
        assert found == [data for data in sse.data_fields(stream) if usage in data]
    assert list(sse.data_fields_with(streams[1], usage)) == [b'{"n":2,"usage":{"total_tokens":3}}']
