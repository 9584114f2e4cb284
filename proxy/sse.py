"""Server-sent events as OpenAI streams them: the one place that writes or reads the framing.

An event is a ``data:`` line (after an ``event:`` line naming it, in the Responses
API) and a blank line; a chat completions stream ends with ``data: [DONE]``; a line
that starts with ``:`` is a comment, which the proxy sends as a keep-alive while it
has nothing else to say. Relayed upstream events are cut
at their boundaries (:class:`EventCutter`) and passed on byte for byte, never
decoded and encoded again.
"""

from __future__ import annotations

from collections.abc import Iterator

from proxy import json_codec

DONE_DATA = b"[DONE]"  # the data of a stream's last event
DONE = b"data: " + DONE_DATA + b"\n\n"
KEEPALIVE = b": keep-alive\n\n"
_DONE_LINE = DONE.rstrip(b"\n")


def data_event(data: bytes) -> bytes:
    """One event carrying ``data``, already encoded (a JSON object, or ``[DONE]``)."""
    return b"data: " + data + b"\n\n"


def named_event(name: str, data: bytes) -> bytes:
    """One event with an ``event:`` name (the Responses API names each by its type)."""
    return b"event: " + name.encode() + b"\ndata: " + data + b"\n\n"


def json_event(payload: object) -> bytes:
    """One event carrying ``payload`` as JSON."""
    return data_event(json_codec.dumps(payload))


def data_fields(events: bytes) -> Iterator[bytes]:
    """The ``data`` of every event in ``events`` (whole events, as :class:`EventCutter`
    cuts them); the lines of a multi-line ``data`` joined, comments skipped."""
    for block in _normalized(events).split(b"\n\n"):
        if b"\n" not in block:  # the usual event, one line: no list to build and join
            if block.startswith(b"data:"):
                yield block[5:].lstrip(b" ")
            continue
        lines = [line[5:].lstrip(b" ") for line in block.split(b"\n") if line.startswith(b"data:")]
        if lines:
            yield b"\n".join(lines)


def data_fields_with(events: bytes, marker: bytes) -> Iterator[bytes]:
    """What :func:`data_fields` reads from the events of ``events`` whose text holds
    ``marker`` (no newline in it), found without reading the others: the relay looks
    for the one event of a stream that carries ``usage``, and reading all of a 17-event
    stream to find it cost more than the rest of the relay's work on it."""
    events = _normalized(events)
    start = 0
    while (at := events.find(marker, start)) >= 0:
        begin = events.rfind(b"\n\n", 0, at)
        end = events.find(b"\n\n", at)
        start = len(events) if end < 0 else end
        yield from data_fields(events[0 if begin < 0 else begin + 2 : start])


def _normalized(events: bytes) -> bytes:
    return events.replace(b"\r\n", b"\n") if b"\r" in events else events


def ends_stream(events: bytes) -> bool:
    """Whether ``events`` hold the ``data: [DONE]`` that ends a chat (or completions)
    stream, or the last event of a Responses API stream, which sends no ``[DONE]``."""
    if _DONE_LINE in events:
        return True
    return _RESPONSE_EVENT in events and any(end in events for end in _RESPONSE_ENDS)


_RESPONSE_EVENT = b"event: response."
_RESPONSE_ENDS = tuple(
    b"event: response." + kind + b"\n" for kind in (b"completed", b"failed", b"incomplete")
)


class EventCutter:
    """Whole events out of a byte stream that arrives in pieces cut anywhere."""

    def __init__(self) -> None:
        self._pending = b""

    def feed(self, piece: bytes) -> bytes:
        """The events ``piece`` completes, up to the last blank line; ``b""`` when none."""
        if b"\r" in piece:
            piece = piece.replace(b"\r\n", b"\n")
        if self._pending:
            piece = self._pending + piece
        cut = piece.rfind(b"\n\n")
        if cut < 0:
            self._pending = piece
            return b""
        if cut + 2 == len(piece):  # the usual piece: whole events, passed on uncopied
            self._pending = b""
            return piece
        self._pending = piece[cut + 2 :]
        return piece[: cut + 2]

    def rest(self) -> bytes:
        """A last event the stream ended without its blank line, completed; or ``b""``."""
        rest, self._pending = self._pending, b""
        return rest.rstrip(b"\n") + b"\n\n" if rest.strip() else b""
