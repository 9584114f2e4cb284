"""The wire models: unknown fields kept, absent told from null, upstream replies read."""

from __future__ import annotations

import pytest

from proxy import json_codec
from proxy.errors import UpstreamError
from proxy.protocol.base import ErrorResponse, dump_json, unset
from proxy.protocol.chat import (
    ChatCompletionChunk,
    ChoiceDelta,
    Mode,
    parse_request,
    read_chunk,
    read_completion,
)


def test_unknown_fields_of_a_request_are_kept() -> None:
    request = parse_request(
        {"model": "m", "messages": [{"role": "user", "content": "hi", "x-note": 1}], "seed": 7}
    )
    assert request.model_extra == {"seed": 7}
    assert request.messages[0].model_extra == {"x-note": 1}


def test_an_upstream_chunk_goes_back_out_with_its_unknown_fields() -> None:
    payload = {
        "id": "c1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "delta": {"content": "hi", "x-extra": [1]}}],
        "provider_field": {"a": None},
    }
    assert json_codec.loads(dump_json(read_chunk(payload))) == payload


def test_a_field_set_to_none_is_sent_and_an_unset_one_is_not() -> None:
    chunk = ChatCompletionChunk(id="c", choices=[], usage=None)
    assert json_codec.loads(dump_json(chunk)) == {"id": "c", "choices": [], "usage": None}
    unset(chunk, "usage")
    assert json_codec.loads(dump_json(chunk)) == {"id": "c", "choices": []}
    assert json_codec.loads(dump_json(ChoiceDelta(content=None))) == {"content": None}


def test_an_upstream_completion_is_read_with_its_text() -> None:
    content = b'{"id":"a","choices":[{"index":0,"message":{"role":"assistant","content":"42"}}]}'
    assert read_completion(content).text() == "42"


@pytest.mark.parametrize("content", [b"not json", b'{"choices": "no"}', b"[]", b'{"id": "a"}'])
def test_what_is_not_a_completion_is_an_upstream_error(content: bytes) -> None:
    with pytest.raises(UpstreamError, match="not a chat completion"):
        read_completion(content)


def test_an_event_that_is_not_a_chunk_is_an_upstream_error() -> None:
    with pytest.raises(UpstreamError, match="not a chunk"):
        read_chunk({"choices": [{"delta": "text"}]})


def test_an_upstream_error_event_is_read_with_its_unknown_fields() -> None:
    payload = {"error": {"message": "overloaded", "type": "server_error", "retry_in": 2}}
    error = ErrorResponse.model_validate(payload)
    assert error.error.message == "overloaded"
    assert json_codec.loads(dump_json(error)) == payload


TOOLS = [{"type": "function", "function": {"name": "f"}}]
ASKED = {"role": "user", "content": "hi"}
RESULT = {"role": "tool", "content": "4", "tool_call_id": "c1"}


@pytest.mark.parametrize(
    ("extra", "default", "mode"),
    [
        ({}, "passthrough", "passthrough"),
        ({}, "orchestrate", "orchestrate"),
        ({"tools": TOOLS}, "orchestrate", "passthrough"),  # the client runs its own tools
        ({"messages": [ASKED, RESULT]}, "orchestrate", "passthrough"),
        ({}, "select", "passthrough"),  # nothing to select from
        ({"tools": TOOLS}, "select", "select"),
        ({"toolgraph": {"mode": "orchestrate"}, "tools": TOOLS}, "select", "orchestrate"),
    ],
)
def test_the_mode_is_the_request_s_own_else_the_default_where_it_fits(
    extra: dict[str, object], default: Mode, mode: Mode
) -> None:
    request = parse_request({"model": "m", "messages": [ASKED], **extra})
    assert request.resolve_mode(default) == mode
