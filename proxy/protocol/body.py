"""A request's body: read within its size limit, decoded within its depth and length limits.

A body up to :data:`ON_LOOP_BYTES` is decoded in one ``json_codec.loads`` on the event
loop: at most a couple of thousand values, about a millisecond. A larger one is
decoded in pieces (:mod:`proxy.protocol._chunked_json`) by a caller that has moved to a
worker thread, so that no request holds the loop for long, whatever its shape.

Nesting is bounded (``limits.max_json_depth``) because a body toolgraph changes is
encoded again, and orjson encodes only 255 levels of the 1,024 it decodes: a
deeper body used to be accepted, then failed as a 500 on its way upstream.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.requests import ClientDisconnect, Request

from proxy import json_codec
from proxy.config import LimitsSettings
from proxy.errors import ClientClosedRequest, InvalidRequest, RequestTooLarge
from proxy.protocol._chunked_json import CHUNK_BYTES, ShapeError, TooDeep, TooManyItems
from proxy.protocol._chunked_json import loads_in_chunks as _loads_in_chunks
from proxy.protocol.base import format_param

ON_LOOP_BYTES = CHUNK_BYTES

M = TypeVar("M", bound=BaseModel)


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, refused with 413 as soon as it grows past ``limit``; a client
    gone before its last byte is :class:`ClientClosedRequest` (499), like any other."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _too_large(limit)
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise _too_large(limit)
            chunks.append(chunk)
    except ClientDisconnect:
        raise ClientClosedRequest("the client disconnected while sending its request") from None
    return b"".join(chunks)


async def decode_body(raw: bytes, limits: LimitsSettings) -> Any:
    """:func:`decode_json` for a body that has no top-level lists of its own to bound,
    in a worker thread when it is large."""
    if len(raw) <= ON_LOOP_BYTES:
        return decode_json(raw, limits.max_json_depth, {})
    return await asyncio.to_thread(decode_json, raw, limits.max_json_depth, {})


async def read_model(request: Request, limits: LimitsSettings, model: type[M], code: str) -> M:
    """The body read, decoded and validated as ``model``; a body it refuses is a 400 with
    ``code``, in pydantic's words, naming the first field that is wrong."""
    raw = await read_body(request, limits.max_body_bytes)
    body = await decode_body(raw, limits)
    try:
        if len(raw) <= ON_LOOP_BYTES:
            return model.model_validate(body)
        return await asyncio.to_thread(model.model_validate, body)  # 8 MB of tools: seconds
    except ValidationError as exc:
        error = exc.errors()[0]
        param = format_param(error["loc"]) or None
        raise InvalidRequest(error["msg"], param=param, code=code) from None


def decode_json(raw: bytes, max_depth: int, item_limits: Mapping[str, int]) -> Any:
    """``raw`` decoded, or :class:`InvalidRequest` saying what is wrong with it.

    ``item_limits`` bounds the length of the top-level arrays it names (``messages``
    → ``limits.max_messages``); they are counted before anything in them is checked.
    Call it in a worker thread when ``len(raw) > ON_LOOP_BYTES``.
    """
    if not raw:
        raise InvalidRequest("the request body is empty; send a JSON object", code="invalid_json")
    try:
        if len(raw) > ON_LOOP_BYTES:
            value = _loads_in_chunks(raw, max_depth, item_limits)
            _check_lengths(value, item_limits)
            return value
        value = json_codec.loads(raw)
    except json_codec.DecodeError as exc:
        raise _invalid_json(exc.msg, exc.lineno, exc.colno) from None
    except TooDeep:
        raise _too_deep(max_depth) from None
    except TooManyItems as exc:
        raise _too_many(exc.key, exc.limit) from None
    except ShapeError as exc:
        line, column = _line_and_column(raw, exc.offset)
        raise _invalid_json(exc.message, line, column) from None
    if raw.count(b"{") + raw.count(b"[") > max_depth and _depth_exceeds(value, max_depth):
        raise _too_deep(max_depth)
    _check_lengths(value, item_limits)
    return value


def _check_lengths(value: Any, item_limits: Mapping[str, int]) -> None:
    if not isinstance(value, dict):
        return
    for key, limit in item_limits.items():
        items = value.get(key)
        if isinstance(items, list) and len(items) > limit:
            raise _too_many(key, limit)


def _depth_exceeds(value: Any, max_depth: int) -> bool:
    # Iterative: a recursive walk would need a frame per level, the fault it looks for.
    if type(value) is not dict and type(value) is not list:
        return False
    pending: list[tuple[Any, int]] = [(value, 1)]
    while pending:
        node, depth = pending.pop()
        if depth > max_depth:
            return True
        for child in node.values() if type(node) is dict else node:
            if type(child) is dict or type(child) is list:
                pending.append((child, depth + 1))
    return False


def _line_and_column(raw: bytes, offset: int) -> tuple[int, int]:
    line_start = raw.rfind(b"\n", 0, offset) + 1
    column = len(raw[line_start:offset].decode("utf-8", "replace")) + 1
    return raw.count(b"\n", 0, offset) + 1, column


def _invalid_json(problem: str, line: int, column: int) -> InvalidRequest:
    return InvalidRequest(
        f"the request body is not valid JSON: {problem} (line {line}, column {column})",
        code="invalid_json",
    )


def _too_deep(max_depth: int) -> InvalidRequest:
    return InvalidRequest(
        f"the request body is nested more than {max_depth} levels deep (limits.max_json_depth)",
        code="json_too_deep",
    )


def check_content_parts(items: Any, key: str, limit: int) -> None:
    """Refuse more than ``limit`` content parts in the messages (or input items) under
    ``key``, counted before any part is checked: a part costs a validation, a copy and
    a token count each, and one message once held 650,000 of them."""
    if not isinstance(items, list):
        return
    total = 0
    for index, item in enumerate(items):
        content = item.get("content") if isinstance(item, dict) else None
        if isinstance(content, list):
            total += len(content)
            if total > limit:
                raise InvalidRequest(
                    f"too many content parts: more than {limit} in the request "
                    "(limits.max_content_parts)",
                    param=f"{key}[{index}].content",
                    code="too_many_content_parts",
                )


def _too_many(key: str, limit: int) -> InvalidRequest:
    return InvalidRequest(
        f"too many {key}: more than {limit} (limits.max_{key})", param=key, code=f"too_many_{key}"
    )


def _too_large(limit: int) -> RequestTooLarge:
    return RequestTooLarge(
        f"the request body is larger than the limit of {limit} bytes (limits.max_body_bytes)"
    )
