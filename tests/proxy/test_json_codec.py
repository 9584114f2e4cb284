"""The proxy's JSON codec: orjson's output, every integer exact."""

from __future__ import annotations

import orjson
import pytest

from proxy import json_codec

BIG = 123456789012345678901234567890


@pytest.mark.parametrize(
    "number", [BIG, -BIG, 2**64, -(2**63) - 1, 2**64 - 1, -(2**63), 10**4000, 12345]
)
def test_an_integer_of_any_size_survives_decode_and_encode_byte_for_byte(number: int) -> None:
    text = b'{"seed":%d,"x":[1.5e-7,true,null,"a"]}' % number
    value = json_codec.loads(text)
    assert value["seed"] == number
    assert json_codec.dumps(value) == text


def test_output_is_orjsons_own_apart_from_the_big_integers() -> None:
    value = {"b": 1e30, "a": [1.5e-7, "é", {"n": BIG}], "c": None}
    expected = orjson.dumps({**value, "a": [1.5e-7, "é", {"n": 0}]}).replace(b"0}", b"%d}" % BIG)
    assert json_codec.dumps(value) == expected
    assert json_codec.dumps(value, sort_keys=True).startswith(b'{"a":')


def test_default_applies_on_both_paths() -> None:
    assert json_codec.dumps({"when": object}, default=lambda _: "x") == b'{"when":"x"}'
    assert json_codec.dumps([BIG, object], default=lambda _: "x") == b'[%d,"x"]' % BIG


def test_digits_inside_strings_take_the_exact_path_and_decode_the_same() -> None:
    text = '{"id":"00000000000000000000000000","n":1.25}'
    assert json_codec.loads(text) == {"id": "0" * 26, "n": 1.25}


@pytest.mark.parametrize(
    "text",
    [
        b"",
        b"[1,",
        b"NaN",
        b"[Infinity, 12345678901234567890123]",
        b'{"a": 12345678901234567890123,}',
        b"[" + b"1" * 5000 + b"]",  # past Python's bound on one integer's digits
        b'["\xff", 12345678901234567890123]',
        b"[" * 100_000 + b"12345678901234567890123" + b"]" * 100_000,
    ],
)
def test_bad_text_is_a_decode_error_on_both_paths(text: bytes) -> None:
    with pytest.raises(json_codec.DecodeError):
        json_codec.loads(text)


def test_values_json_cannot_hold_are_still_refused() -> None:
    with pytest.raises(TypeError):
        json_codec.dumps({"x": object()})
    with pytest.raises(TypeError):
        json_codec.dumps({"x": object(), "n": BIG})
