"""Decode a large JSON document in pieces small enough not to hold the GIL for long.

orjson holds the GIL for the whole of one ``loads``: 16 MiB of a million tiny
objects took 2.4 s, and a worker thread does not help, since the event loop
cannot run while the GIL is held (measured: 2.2 s of loop lag with the decode in
``asyncio.to_thread``). So one pass of Python finds the document's structure,
which gives the GIL up every few milliseconds, and :func:`proxy.json_codec.loads` decodes it a
run of members at a time, each run at most about :data:`CHUNK_BYTES`.

The pass also refuses, before anything is decoded, a document nested deeper than
``max_depth`` and a top-level array (``messages``, ``tools``) longer than its limit.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from proxy import json_codec

CHUNK_BYTES = 32 * 1024

_TOKEN = re.compile(rb'["\[\]{},:]')
# Shortcuts that keep the pass's Python steps per member few: a container with no
# container inside (strings skipped whole), and a run of scalars and commas.
_STRING = rb'"[^"\\]*(?:\\.[^"\\]*)*"'
_FLAT = {
    0x7B: re.compile(rb"\{[^{}\[\]\"]*(?:" + _STRING + rb"[^{}\[\]\"]*)*\}"),
    0x5B: re.compile(rb"\[[^{}\[\]\"]*(?:" + _STRING + rb"[^{}\[\]\"]*)*\]"),
}
_PLAIN = re.compile(rb'[^"\[\]{}]*')
_EMPTY_MEMBER = re.compile(rb",[ \t\r\n]*,")
_SPACE = b" \t\r\n"


class ShapeError(ValueError):
    """The document is malformed, too deep or too long; ``offset`` is a byte offset."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.message = message
        self.offset = offset


class TooDeep(ShapeError):
    pass


class TooManyItems(ShapeError):
    def __init__(self, key: str, limit: int, offset: int) -> None:
        super().__init__(f"more than {limit} items in {key!r}", offset)
        self.key = key
        self.limit = limit


@dataclass
class _Run:
    """Members ``raw[start:end]`` of one container, decoded by one ``loads``."""

    start: int
    end: int


@dataclass
class _Node:
    """A container too large for one ``loads``: runs of small members and large children."""

    opener: int  # ord("{") or ord("[")
    items: list[_Run | tuple[int, int, _Node]] = field(default_factory=list)


@dataclass
class _Frame:
    opener: int
    start: int
    member_start: int
    limit: tuple[str, int] | None = None
    members: int = 0
    colon: int | None = None
    child: _Node | None = None
    child_span: tuple[int, int] = (0, 0)
    run: _Run | None = None
    node: _Node | None = None

    def items(self) -> _Node:
        if self.node is None:
            self.node = _Node(self.opener)
        return self.node


def loads_in_chunks(
    raw: bytes, max_depth: int, item_limits: Mapping[str, int], chunk: int = CHUNK_BYTES
) -> Any:
    """``raw`` decoded, or :class:`ShapeError` saying why not (orjson's message included).

    ``item_limits`` bounds the length of the top-level object's arrays by their name.
    """
    root = _scan(raw, max_depth, item_limits, chunk)
    if isinstance(root, _Run):
        return _loads(raw, root.start, root.end)
    return _build(raw, root)


def _scan(raw: bytes, max_depth: int, item_limits: Mapping[str, int], chunk: int) -> _Node | _Run:
    stack: list[_Frame] = []
    root: _Node | _Run | None = None
    pos = end = 0
    while (match := _TOKEN.search(raw, pos)) is not None:
        at = match.start()
        char = raw[at]
        pos = at + 1
        if char == 0x22:  # '"'
            pos = _string_end(raw, pos)
            continue
        if root is not None:
            break
        if char in (0x7B, 0x5B):  # '{' '['
            if not stack and raw[:at].strip(_SPACE):
                raise ShapeError("unexpected content before the document", 0)
            if len(stack) >= max_depth:
                raise TooDeep(f"nested more than {max_depth} levels deep", at)
            limit = _limit_of(raw, stack, item_limits)
            if stack and limit is None and (leaf_end := _small_leaf_end(raw, at, chunk)) > 0:
                pos = leaf_end  # its parent's run decodes it
                continue
            stack.append(_Frame(char, at, at + 1, limit))
        elif not stack:
            raise ShapeError(f"unexpected {chr(char)!r}", at)
        elif char in (0x7D, 0x5D):  # '}' ']'
            root, end = _close(raw, stack, at, char, chunk), pos
        elif char == 0x2C:  # ','
            _end_member(raw, stack[-1], at, chunk)
            if stack[-1].opener == 0x5B:
                pos = _skip_scalars(raw, stack[-1], pos, chunk)
        else:  # ':'
            stack[-1].colon = at
    if stack:
        raise ShapeError("the document ends before its last bracket is closed", len(raw))
    if root is None:  # a lone scalar: nothing to cut
        return _Run(0, len(raw))
    if raw[end:].strip(_SPACE):
        raise ShapeError("unexpected content after the end of the document", end)
    return root


def _limit_of(
    raw: bytes, stack: list[_Frame], item_limits: Mapping[str, int]
) -> tuple[str, int] | None:
    if len(stack) != 1 or stack[0].colon is None or stack[0].opener != 0x7B:
        return None
    try:
        key = json_codec.loads(raw[stack[0].member_start : stack[0].colon])
    except json_codec.DecodeError:
        return None  # the decode that follows names the fault
    if isinstance(key, str) and key in item_limits:
        return key, item_limits[key]
    return None


def _close(raw: bytes, stack: list[_Frame], at: int, char: int, chunk: int) -> _Node | _Run | None:
    frame = stack.pop()
    if char - frame.opener != 2:  # '[' + 2 == ']', '{' + 2 == '}'
        raise ShapeError(f"{chr(char)!r} closes {chr(frame.opener)!r}", at)
    if frame.members or raw[frame.member_start : at].strip(_SPACE):
        _end_member(raw, frame, at, chunk)
    if frame.node is None and at + 1 - frame.start <= chunk:
        done: _Node | _Run = _Run(frame.start, at + 1)
    else:
        _flush(frame)
        done = frame.items()
    if not stack:
        return done
    if isinstance(done, _Node):
        stack[-1].child = done
        stack[-1].child_span = (frame.start, at + 1)
    return None


def _end_member(raw: bytes, frame: _Frame, at: int, chunk: int) -> None:
    if not raw[frame.member_start : at].strip(_SPACE):
        raise ShapeError("a value is missing", at)
    frame.members += 1
    if frame.limit is not None and frame.members > frame.limit[1]:
        raise TooManyItems(frame.limit[0], frame.limit[1], at)
    if frame.child is not None:
        _flush(frame)
        frame.items().items.append((frame.member_start, _key_end(raw, frame, at), frame.child))
        frame.child = None
    elif frame.run is None:
        frame.run = _Run(frame.member_start, at)
    elif at - frame.run.start > chunk:
        _flush(frame)
        frame.run = _Run(frame.member_start, at)
    else:
        frame.run.end = at
    frame.member_start = at + 1
    frame.colon = None


def _key_end(raw: bytes, frame: _Frame, at: int) -> int:
    """Where the name of a member holding a large child ends (-1 in an array), once the
    text around the child is known to be blank: nothing else in it is ever decoded."""
    child_start, child_end = frame.child_span
    before = frame.member_start
    if frame.opener == 0x7B:
        if frame.colon is None or frame.colon > child_start:
            raise ShapeError("a member has no name", frame.member_start)
        before = frame.colon + 1
    if raw[before:child_start].strip(_SPACE) or raw[child_end:at].strip(_SPACE):
        raise ShapeError("unexpected content next to a value", child_end)
    return frame.colon if frame.opener == 0x7B and frame.colon is not None else -1


def _small_leaf_end(raw: bytes, at: int, chunk: int) -> int:
    """The end of the container opening at ``at`` if it holds no container and fits
    in a chunk, else -1."""
    flat = _FLAT[raw[at]].match(raw, at)
    return flat.end() if flat is not None and flat.end() - at <= chunk else -1


def _skip_scalars(raw: bytes, frame: _Frame, pos: int, chunk: int) -> int:
    """Take the array's members from ``pos`` up to the last comma before its next string
    or bracket in one step: they are scalars. Returns where the scan goes on."""
    last = raw.rfind(b",", pos, _PLAIN.match(raw, pos).end())  # type: ignore[union-attr]
    if last < 0:
        return pos
    if _EMPTY_MEMBER.search(raw, pos - 1, last + 1):
        raise ShapeError("a value is missing", pos)
    frame.members += raw.count(b",", pos, last + 1)
    if frame.limit is not None and frame.members > frame.limit[1]:
        raise TooManyItems(frame.limit[0], frame.limit[1], last)
    run = frame.run or _Run(pos, pos)
    while last - run.start > chunk:
        cut = raw.rfind(b",", run.end + 1, run.start + chunk + 1)
        if cut < 0:  # one member longer than a chunk
            cut = raw.find(b",", run.end + 1, last)
        if cut < 0:
            break
        run.end = cut
        if run.end > run.start:
            frame.items().items.append(run)
        run = _Run(cut + 1, cut + 1)
    run.end = last
    frame.run = run
    frame.member_start = last + 1
    return last + 1


def _flush(frame: _Frame) -> None:
    if frame.run is not None:
        frame.items().items.append(frame.run)
        frame.run = None


def _string_end(raw: bytes, pos: int) -> int:
    """The offset just past the string whose first character is at ``pos``."""
    while True:
        quote = raw.find(b'"', pos)
        if quote < 0:
            raise ShapeError("a string is not terminated", pos - 1)
        escapes = 0
        while raw[quote - 1 - escapes] == 0x5C:  # '\\'
            escapes += 1
        if escapes % 2 == 0:
            return quote + 1
        pos = quote + 1


def _build(raw: bytes, node: _Node) -> Any:
    if node.opener == 0x5B:
        values: list[Any] = []
        for item in node.items:
            if isinstance(item, _Run):
                values.extend(_loads(raw, item.start, item.end, b"[", b"]"))
            else:
                values.append(_build(raw, item[2]))
        return values
    members: dict[str, Any] = {}
    for item in node.items:
        if isinstance(item, _Run):
            members.update(_loads(raw, item.start, item.end, b"{", b"}"))
            continue
        start, key_end, child = item
        key = _loads(raw, start, key_end)
        if not isinstance(key, str):
            raise ShapeError("a member's name is not a string", start)
        members[key] = _build(raw, child)
    return members


def _loads(raw: bytes, start: int, end: int, before: bytes = b"", after: bytes = b"") -> Any:
    try:
        return json_codec.loads(before + raw[start:end] + after)
    except json_codec.DecodeError as exc:
        raise ShapeError(exc.msg, start + max(0, exc.pos - len(before))) from None
