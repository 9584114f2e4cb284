"""The request body at the door: lengths before fields, depth bounded, large bodies in pieces."""

from __future__ import annotations

import json
import random
from typing import Any

import openai
import orjson
import pytest

from proxy import json_codec
from proxy.protocol._chunked_json import ShapeError, TooDeep, TooManyItems, loads_in_chunks
from proxy.protocol.body import ON_LOOP_BYTES
from testing.fake_upstream import FakeUpstream
from tests.conftest import ServerThread
from tests.proxy.test_chat_passthrough import sdk, user
from tests.proxy.test_errors import error_of, post


def nested(depth: int) -> Any:
    value: Any = "bottom"
    for _ in range(depth):
        value = {"a": value}
    return value


@pytest.mark.parametrize("padding", [0, 2 * ON_LOOP_BYTES])
def test_too_many_messages_is_found_before_any_message_is_checked(
    start_proxy: Any, upstream: FakeUpstream, padding: int
) -> None:
    # Every message is invalid: a 400 naming messages.[0].role would mean each one was
    # validated (a million of them once held the event loop for 11 s) before counting.
    server = start_proxy(limits={"max_messages": 100})
    bad = [{"role": "robot", "content": "x" * padding}] + [{"role": "robot"}] * 200
    response = post(server, orjson.dumps({"model": "m", "messages": bad}))

    assert response.status_code == 400
    error = error_of(response)
    assert (error["code"], error["param"]) == ("too_many_messages", "messages")
    assert "limits.max_messages" in error["message"]
    assert upstream.requests == []


def test_a_large_body_arrives_upstream_whole(proxy: ServerThread, upstream: FakeUpstream) -> None:
    history = [{"role": "user", "content": f"turn {i} " + "w" * 300} for i in range(400)]
    tools = [
        {"type": "function", "function": {"name": f"f{i}", "parameters": {"type": "object"}}}
        for i in range(300)
    ]
    body = {"model": "m", "messages": history, "tools": tools}
    raw = json.dumps(body).encode()
    assert len(raw) > 4 * ON_LOOP_BYTES

    response = post(proxy, raw)

    assert response.status_code == 200
    assert upstream.requests[-1].body == body


def test_a_bad_message_deep_in_a_large_body_is_named(proxy: ServerThread) -> None:
    history = [{"role": "user", "content": "w" * 300} for _ in range(600)]
    history[555]["role"] = "robot"

    with pytest.raises(openai.BadRequestError) as raised:
        sdk(proxy).chat.completions.create(model="m", messages=history)  # type: ignore[arg-type]

    assert raised.value.param == "messages.[555].role"


@pytest.mark.parametrize("padding", [0, 2 * ON_LOOP_BYTES])
def test_a_body_nested_too_deep_is_refused_at_the_door(
    proxy: ServerThread, upstream: FakeUpstream, padding: int
) -> None:
    # orjson decodes 1,024 levels but encodes 255: a re-encoded body (here because of its
    # toolgraph field) used to fail on its way upstream, as a 500.
    with pytest.raises(openai.BadRequestError) as raised:
        sdk(proxy).chat.completions.create(
            model="m",
            messages=user("x" * padding),
            extra_body={"toolgraph": {"mode": "passthrough"}, "metadata": nested(300)},
        )

    assert raised.value.code == "json_too_deep"
    assert "limits.max_json_depth" in raised.value.message
    assert upstream.requests == []


def test_nesting_up_to_the_limit_passes(start_proxy: Any, upstream: FakeUpstream) -> None:
    server = start_proxy(limits={"max_json_depth": 20})
    body = {"model": "m", "messages": user("x"), "toolgraph": {"mode": "passthrough"}}

    # The body is the first level: 1 + 19 objects is 20 levels.
    assert post(server, json.dumps(body | {"deep": nested(19)})).status_code == 200
    assert error_of(post(server, json.dumps(body | {"deep": nested(20)})))["code"] == (
        "json_too_deep"
    )


@pytest.mark.parametrize(
    "raw",
    [b'{"model": "m", "messages": [' + b'{"role": "user"},' * 4000 + b"]}", b"[" * 3000],
)
def test_malformed_large_bodies_are_invalid_json(proxy: ServerThread, raw: bytes) -> None:
    error = error_of(post(proxy, raw))
    assert error["code"] in ("invalid_json", "json_too_deep")
    assert "line 1" in error["message"] or error["code"] == "json_too_deep"


def _document(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if depth > 5 or roll < 0.3:
        return rng.choice([1, -2.5, 'q"uo\\te', "é{}[],:", True, None, 10**30, ""])
    if roll < 0.65:
        return [_document(rng, depth + 1) for _ in range(rng.randint(0, 5))]
    keys = ["k", "a b", 'q"', "{x}", "é"]
    return {f"{rng.choice(keys)}{i}": _document(rng, depth + 1) for i in range(rng.randint(0, 5))}


def test_decoding_in_pieces_agrees_with_one_decode_on_good_and_broken_documents() -> None:
    rng = random.Random(11)
    for _ in range(3000):
        raw = json.dumps(_document(rng), ensure_ascii=False).encode()
        if rng.random() < 0.5:  # one stray character, somewhere
            at = rng.randrange(len(raw) + 1)
            raw = raw[:at] + rng.choice([b",", b"]", b"}", b"[", b"{", b":", b'"', b"x"]) + raw[at:]
        try:
            expected: Any = json_codec.loads(raw)
        except json_codec.DecodeError:
            expected = ShapeError
        for chunk in (1, 7, 64, 4096):
            try:
                got: Any = loads_in_chunks(raw, 1000, {}, chunk)
            except ShapeError:
                got = ShapeError
            assert got == expected, (raw, chunk)


@pytest.mark.parametrize("chunk", [1, 16, 256])
def test_long_runs_of_scalars_and_flat_objects_decode_whole(chunk: int) -> None:
    scalars = [i if i % 3 else None for i in range(2000)]
    flat = [{"role": "user", "n": i, "s": "a,b]}"} for i in range(300)]
    document = {"x": scalars, "y": flat, "z": [scalars[:50], flat[:5]]}
    raw = json.dumps(document).encode()
    assert loads_in_chunks(raw, 8, {}, chunk) == document
    for broken in (raw.replace(b"7, ", b"7, , ", 1), raw.replace(b"9, ", b"9 ", 1)):
        with pytest.raises(ShapeError):
            loads_in_chunks(broken, 8, {}, chunk)
    with pytest.raises(TooDeep):
        loads_in_chunks(raw, 2, {}, chunk)
    with pytest.raises(TooManyItems):
        loads_in_chunks(raw, 8, {"x": 1999}, chunk)


def test_too_many_content_parts_is_refused_before_any_part_is_checked(
    start_proxy: Any, upstream: FakeUpstream
) -> None:
    # 650,000 parts in one message were once answered 200 after 25-55 s of work.
    server = start_proxy(limits={"max_content_parts": 5})
    parts: Any = [{"type": "text", "text": "x"}] * 3
    messages: Any = [{"role": "user", "content": parts}, {"role": "user", "content": parts}]

    with pytest.raises(openai.BadRequestError) as caught:
        sdk(server).chat.completions.create(model="gpt-x", messages=messages)

    error = caught.value.body
    assert isinstance(error, dict)
    assert (error["code"], error["param"]) == ("too_many_content_parts", "messages[1].content")
    assert "limits.max_content_parts" in error["message"]
    assert upstream.requests == []
