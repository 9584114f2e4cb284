"""A scriptable OpenAI-compatible upstream: a real HTTP server on loopback.

It stands in for the external LLM only, in the tests and in the overhead
benchmark. It serves chat completions, the routes beside them (completions, plain
and streamed; embeddings, as floats or base64; moderations), the model list
(:attr:`FakeUpstream.models`) and, when :attr:`FakeUpstream.speaks_responses` says so,
the Responses API (:mod:`testing.fake_responses`). Each request takes the script its
:attr:`FakeUpstream.responder` picks for it (a test's function of the request body,
for answers that depend on what was asked, such as parallel calls), else the next
queued :class:`Script`, else the default one, and is answered as OpenAI's API would:
a plain answer, streamed chunks with ``usage`` (its ``cached_tokens`` from the prompts it
saw before, :mod:`testing.fake_cache`), tool calls in both forms, an error,
or a slow or hung answer. Every request is recorded (unless ``record=False``, as the
command line runs it) so a test can check what reached the upstream. The answers
themselves are made in :mod:`testing.fake_answer`, the HTTP framing in
:mod:`testing.fake_wire`.

    python -m testing.fake_upstream --port 9100 --delay-ms 20
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import socket
import threading
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from proxy import json_codec
from testing import fake_responses
from testing.fake_answer import Answer
from testing.fake_cache import PromptCache
from testing.fake_endpoints import embeddings, model_list, moderations
from testing.fake_script import FakeToolCall, Script
from testing.fake_wire import drop, read_body, send, send_json

__all__ = ["FakeToolCall", "FakeUpstream", "RecordedRequest", "Responder", "Script"]


Responder = Callable[[dict[str, Any]], "Script | None"]


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


class FakeUpstream:
    """Serve on 127.0.0.1 in a thread of its own; ``base_url`` ends in ``/v1``."""

    def __init__(self, default: Script | None = None, record: bool = True) -> None:
        self.default = default or Script()
        # A benchmark's tens of thousands of kept requests make the garbage
        # collector's full passes stall every answer in flight: it records nothing.
        self.record = record
        self.requests: list[RecordedRequest] = []
        self.disconnects = 0  # hung answers whose client went away
        self.responder: Responder | None = None
        self.models = list(_MODELS)
        # POST /v1/responses: a 404 (a chat-only upstream, as most are) unless True
        self.speaks_responses = False
        self.stored_responses: dict[str, bytes] = {}  # its whole answers, by id
        # The prefix of each chat prompt it saw before: usage's cached_tokens
        self.prompt_cache = PromptCache()
        self._queue: deque[Script] = deque()
        self._ids = itertools.count(1)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._thread: threading.Thread | None = None
        self._stopped: asyncio.Event | None = None
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def enqueue(self, *scripts: Script) -> None:
        self._queue.extend(scripts)

    def reset(self) -> None:
        self.responder = None
        self.models = list(_MODELS)
        self.speaks_responses = False
        self.stored_responses.clear()
        self.prompt_cache.clear()
        self._queue.clear()
        self.requests.clear()
        self.disconnects = 0

    def start(self, port: int = 0) -> FakeUpstream:
        ready = threading.Event()

        def run() -> None:
            asyncio.run(self._serve(port, ready))

        self._thread = threading.Thread(target=run, name="fake-upstream", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("the fake upstream did not start")
        return self

    def stop(self) -> None:
        if self._loop is not None and self._stopped is not None:
            self._loop.call_soon_threadsafe(self._stopped.set)
        if self._thread is not None:
            self._thread.join(10)

    async def serve_forever(self, port: int) -> None:
        await self._serve(port, threading.Event())

    async def _serve(self, port: int, ready: threading.Event) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopped = asyncio.Event()
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", port, backlog=1024)
        self.port = self._server.sockets[0].getsockname()[1]
        ready.set()
        async with self._server:
            await self._stopped.wait()
            self._server.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            while await self._answer_one(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        except asyncio.CancelledError:
            pass  # the server is stopping; the connection goes with it
        finally:
            writer.close()

    async def _hang(self, reader: asyncio.StreamReader) -> bool:
        """Answer nothing more until the client goes away, and count that it did."""
        await reader.read()
        self.disconnects += 1
        return False

    async def _answer_one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, path, _ = lines[0].split(" ", 2)
        headers = {
            k.strip().lower(): v.strip()
            for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)
        }
        body = await read_body(reader, headers)
        parsed = json_codec.loads(body) if body else None  # big integers exact
        if self.record:
            self.requests.append(RecordedRequest(method, path, headers, parsed))
        if self.speaks_responses and "/responses/" in path and method in ("GET", "DELETE"):
            await fake_responses.answer_stored(writer, self.stored_responses, method, path)
            return True
        route = _route(method, path)
        if route is None and self.speaks_responses and method == "POST":
            route = "/responses" if path.endswith("/responses") else None
        if route is None:
            await send_json(
                writer,
                404,
                {
                    "error": {
                        "message": f"no route {method} {path}",
                        "type": "invalid_request_error",
                        "param": None,
                        "code": None,
                    }
                },
            )
            return True
        request = parsed if isinstance(parsed, dict) else {}
        if route == "/responses" and request.get("input") is None:  # no script spent on it
            error = {
                "message": "Missing required parameter: 'input'.",
                "type": "invalid_request_error",
            }
            await send_json(writer, 400, {"error": {**error, "param": "input", "code": None}})
            return True
        script = None
        if self.responder is not None and method == "POST":
            script = self.responder(request)
        if script is None:
            script = self._queue.popleft() if self._queue else self.default
        return await self._answer(reader, writer, script, request, route)

    async def _answer(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        script: Script,
        request: dict[str, Any],
        route: str = "/chat/completions",
    ) -> bool:
        if script.hang:
            return await self._hang(reader)
        if script.delay:
            await asyncio.sleep(script.delay)
        if script.raw_body is not None:
            await send(writer, script.status, script.raw_body, "text/plain", script.headers)
            return True
        if script.status >= 400:
            error = script.error or {
                "message": "scripted failure",
                "type": "server_error",
                "param": None,
                "code": None,
            }
            await send_json(writer, script.status, {"error": error}, script.headers)
            return True
        number = next(self._ids)
        if route == "/models":
            await send_json(writer, 200, model_list(self.models), script.headers)
            return True
        if route == "/embeddings":
            await send_json(writer, 200, embeddings(request), script.headers)
            return True
        if route == "/moderations":
            await send_json(writer, 200, moderations(request, number), script.headers)
            return True
        if route == "/responses":
            return await self._answer_responses(reader, writer, script, request, number)
        text_api = route == "/completions"
        seen = None if text_api else self.prompt_cache.see(request)
        answer = Answer(script, request, number, text_api=text_api, seen=seen)
        if not request.get("stream"):
            await send_json(writer, 200, answer.completion(), script.headers)
            return True
        return await self._stream(reader, writer, script, answer)

    async def _answer_responses(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        script: Script,
        request: dict[str, Any],
        number: int,
    ) -> bool:
        """The Responses API's answer: the chat answer in its shapes (testing.fake_responses)."""
        answer = Answer(script, fake_responses.chat_request(request), number)
        if not request.get("stream"):
            content = fake_responses.response(request, answer.completion(), number)
            if request.get("store") is not False:
                self.stored_responses[f"resp_fake{number:06d}"] = content
            await send(writer, 200, content, "application/json", script.headers)
            return True
        if request.get("store") is not False:  # a streamed response is kept as well
            content = fake_responses.response(request, answer.completion(), number)
            self.stored_responses[f"resp_fake{number:06d}"] = content
        events = fake_responses.events(request, answer.events(), number)
        return await self._send_events(reader, writer, script, (event for event in events))

    async def _send_events(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        script: Script,
        events: Iterator[bytes],
    ) -> bool:
        """Whole SSE events, already framed, as a chunked stream."""
        head = (
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n"
        )
        head += "".join(f"{k}: {v}\r\n" for k, v in script.headers.items())
        writer.write(head.encode() + b"\r\n")
        for count, payload in enumerate(events):
            if script.drop_after_events is not None and count >= script.drop_after_events:
                await drop(writer, script)
                return False
            writer.write(b"%x\r\n%s\r\n" % (len(payload), payload))
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True

    async def _stream(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        script: Script,
        answer: Answer,
    ) -> bool:
        head = (
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n"
        )
        head += "".join(f"{k}: {v}\r\n" for k, v in script.headers.items())
        writer.write(head.encode() + b"\r\n")
        for count, event in enumerate(answer.events()):
            if script.drop_after_events is not None and count >= script.drop_after_events:
                await drop(writer, script)
                return False
            if script.hang_after_events is not None and count >= script.hang_after_events:
                await writer.drain()
                return await self._hang(reader)
            payload = b"data: " + event + b"\n\n"
            writer.write(b"%x\r\n%s\r\n" % (len(payload), payload))
            if script.chunk_delay:
                await writer.drain()
                await asyncio.sleep(script.chunk_delay)
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True


_MODELS = ("fake-model",)
_ROUTES = {
    "POST": ("/chat/completions", "/completions", "/embeddings", "/moderations"),
    "GET": ("/models",),
}


def _route(method: str, path: str) -> str | None:
    """The route ``path`` asks for, under any base path (``/v1``, or none)."""
    for route in _ROUTES.get(method, ()):
        if path.endswith(route):
            return route
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description="A scriptable fake OpenAI upstream.")
    parser.add_argument("--port", type=int, default=9100)
    parser.add_argument("--delay-ms", type=float, default=0.0, help="wait before answering")
    parser.add_argument("--text", default=None, help="answer text (default: echo the user)")
    parser.add_argument("--responses", action="store_true", help="serve POST /v1/responses too")
    args = parser.parse_args()
    fake = FakeUpstream(Script(text=args.text, delay=args.delay_ms / 1000), record=False)
    fake.speaks_responses = args.responses
    print(f"fake upstream on http://127.0.0.1:{args.port}/v1", flush=True)
    asyncio.run(fake.serve_forever(args.port))


if __name__ == "__main__":
    main()
