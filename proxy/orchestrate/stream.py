"""A streamed orchestrate answer: keep-alives and progress while the pipeline runs,
the answer's chunks relayed as they come, then the end.

The stream starts at once (the router sends the headers first): while planning
and tools run it carries SSE comments every ``orchestrate.keepalive`` seconds
and, with ``toolgraph.progress``, the stages as ``delta.reasoning_content``. The
pipeline runs in a task of its own and puts its events in :class:`Events`; the
client's generator takes them out, so a client that leaves cancels the task and
the tools with it. A failure is the stream's last event: an error event.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from contextlib import suppress
from typing import Any

from pydantic import JsonValue

from proxy import json_codec, metrics
from proxy.errors import UpstreamError
from proxy.orchestrate.answer import ChunkWriter
from proxy.orchestrate.ending import TurnEnd
from proxy.orchestrate.idempotency import Claim, Stored
from proxy.orchestrate.pipeline import Pipeline, Say, silent
from proxy.orchestrate.records import TurnRecords
from proxy.orchestrate.turn import AskedUser, Failed, Outcome, Turn
from proxy.protocol.chat import ChoiceDelta, read_chunk
from proxy.sse import DONE_DATA, KEEPALIVE, data_event, data_fields
from proxy.upstream import EventStream, waits_counted

#: Events of the answer that may wait for a client reading slower than the upstream
#: writes. The hand-over between the pipeline's task and the client's costs 3.2 µs
#: an event so, 5.6 µs when the pipeline waits for the client at every event, 1.1 µs
#: an event read with no hand-over (20,000 events, uvloop, best of 5).
BEHIND = 16


class Events:
    """The client's events, in order: progress, then the answer's chunks. A wait of
    ``keepalive`` seconds with none is a keep-alive comment, until the answer starts
    (from then on the upstream's own pace is the stream's)."""

    def __init__(self, keepalive: float) -> None:
        self._queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._keepalive = keepalive
        self._answering = False

    def put(self, event: bytes) -> None:
        self._queue.put_nowait(event)

    async def send(self, event: bytes) -> None:
        """Put ``event``; with more than ``BEHIND`` waiting, wait until the client's side
        took them all: the answer is read from the upstream no faster than the client
        reads it."""
        self._queue.put_nowait(event)
        if self._queue.qsize() > BEHIND:
            await self._queue.join()

    def answering(self) -> None:
        self._answering = True

    def close(self) -> None:
        self._queue.put_nowait(None)

    async def next(self) -> bytes | None:
        """The next event, a keep-alive, or None once closed."""
        while True:
            timeout = None if self._answering else self._keepalive
            try:
                event = await asyncio.wait_for(self._queue.get(), timeout)
            except TimeoutError:
                if self._answering:
                    continue
                return KEEPALIVE
            self._queue.task_done()
            return event


class RelayedError(UpstreamError):
    """The upstream's own error event in the answer stream: passed on as it came."""

    def __init__(self, error: JsonValue, data: bytes) -> None:
        message = error.get("message") if isinstance(error, dict) else None
        super().__init__(str(message or "the upstream's answer stream ended in an error"))
        self.error = error
        self.data = data

    def to_dict(self, secrets: Iterable[str] = ()) -> dict[str, Any]:
        return {"error": self.error}

    def to_sse(self, secrets: Iterable[str] = ()) -> bytes:
        return data_event(self.data)


class RelayedAnswer:
    """The joiner of a streamed request: the upstream's chunks, re-stamped with the
    stream's id, into the client's events."""

    def __init__(self, writer: ChunkWriter, events: Events) -> None:
        self._writer = writer
        self._events = events

    async def answer(self, turn: Turn, body: dict[str, Any]) -> str:
        # The stage runs to the answer's last chunk, as the non-streamed one does.
        with turn.stage("answer"):
            self._events.answering()
            stream = await turn.upstream.stream(turn.target, body, None, turn.context)
            try:
                return await self._relay(turn, stream)
            finally:
                await stream.aclose()

    async def _relay(self, turn: Turn, stream: EventStream) -> str:
        text: list[str] = []
        async for events in waits_counted(stream, turn.context):
            for data in data_fields(events):
                chunk = None if data == DONE_DATA else json_codec.loads(data)
                if not isinstance(chunk, dict):
                    continue
                if "error" in chunk:  # the upstream's own mid-stream error: pass it on
                    raise RelayedError(chunk["error"], data)
                turn.usage.add(chunk.get("usage"), "answer")
                if chunk.get("choices"):
                    typed = read_chunk(chunk)
                    text.append(typed.text())
                    await self._events.send(self._writer.upstream_chunk(typed))
        return "".join(text)


class TurnStream:
    def __init__(
        self, pipeline: Pipeline, records: TurnRecords, keepalive: float, secrets: Iterable[str]
    ) -> None:
        self._pipeline = pipeline
        self._records = records
        self._keepalive = keepalive
        self._secrets = tuple(secrets)

    async def stream(self, turn: Turn, claim: Claim | None) -> AsyncIterator[bytes]:
        """The client's events: keep-alives and progress, then the answer's chunks."""
        include_usage = bool(
            turn.request.stream_options and turn.request.stream_options.include_usage
        )
        writer = ChunkWriter(turn.completion_id, turn.created, turn.request.model, include_usage)
        sent: list[bytes] = []  # every event but keep-alives, for a replay
        first = True
        async with TurnEnd(self._records, turn, claim) as end:
            async for event in self._events(turn, writer, end):
                if first:
                    metrics.TIME_TO_FIRST_TOKEN.labels("orchestrate", turn.context.model).observe(
                        turn.context.elapsed()
                    )
                    first = False
                if event is not KEEPALIVE:
                    sent.append(event)
                yield event
            # The stream went out whole (an answer, a question or an error event): a
            # replay gets what the first client got. One its client cut short leaves no
            # answer to replay (``settle`` decides).
            if turn.answered() or turn.tools_ran:
                end.outcome = Stored(200, turn.headers, events=sent)

    async def _events(self, turn: Turn, writer: ChunkWriter, end: TurnEnd) -> AsyncIterator[bytes]:
        events = Events(self._keepalive)
        say: Say = silent
        if turn.request.toolgraph and turn.request.toolgraph.progress:

            def say(text: str) -> None:
                events.put(writer.progress(text + "\n"))

        answer = RelayedAnswer(writer, events)
        work = asyncio.create_task(
            self._pipeline.run(turn, answer, say), name=f"orchestrate:{turn.trace_id}"
        )
        work.add_done_callback(lambda _: events.close())
        try:
            while (event := await events.next()) is not None:
                yield event
            for event in await self._ending(turn, writer, end, work.result()):
                yield event
        finally:
            if not work.done():
                work.cancel()
                with suppress(asyncio.CancelledError, Exception):
                    await work

    async def _ending(
        self, turn: Turn, writer: ChunkWriter, end: TurnEnd, outcome: Outcome
    ) -> list[bytes]:
        """The stream's last events; the results and the trace are kept before them, so
        a follow-up or a trace lookup sent the moment the client sees them finds them."""
        await end.save_trace()
        if isinstance(outcome, Failed):
            return [outcome.error.to_sse(self._secrets)]
        ending = []
        if isinstance(outcome, AskedUser):
            question = ChoiceDelta(content=outcome.question)
            ending += [writer.delta(question), writer.delta(ChoiceDelta(), "stop")]
        return [*ending, *writer.end(turn.usage.as_openai())]
