"""A small OpenAI-compatible chat server over ``llama_cpp.Llama`` with Qwen2.5's tool format.

    .bench/llama-venv/bin/python -m eval.llm.server --model FILE [--port N] [--n-ctx N]

It runs inside the llama venv (llama-cpp-python and the standard library only), in
place of ``llama_cpp.server``, whose ``chatml-function-calling`` handler loses this
model's answers (see :mod:`eval.llm.qwen_format`). ``POST /v1/chat/completions``
takes ``messages``, ``tools`` (``tool_choice: "none"`` drops them),
``response_format`` (``json_schema`` enforced by a llama.cpp grammar;
``json_object`` too, but only when the free reply is not one JSON object),
``max_tokens``, ``temperature``, ``seed`` and ``stream`` (the whole reply as one
chunk, then usage). A prompt longer than the context is a 400
``context_length_exceeded``, as OpenAI answers it. One request is decoded at a
time; llama.cpp reuses the longest prompt prefix the previous request left in its
KV cache, and ``--prompt-cache-mb`` (4,096 by default, 0 turns it off) keeps the KV
state of recent prompts besides (llama-cpp-python's RAM cache, least recently used
first out), so a prompt that shares its start with any of them, not only with the last
one, is read from there on. A pipeline that alternates between a few fixed prompts (a
planner's triage, pick, argument and answer prompts) then reads each fixed part once,
as a serving stack with prefix caching (vLLM's automatic prefix caching, llama.cpp
server's slots, OpenAI's prompt caching) would. A client that hangs up (its timeout)
stops the reply being decoded for it, and a request whose client left while it waited
for the model is dropped, as a serving stack aborts a disconnected request; otherwise a
reply that never ends would hold the one model for every request after it.
"""

from __future__ import annotations

import argparse
import json
import logging
import select
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from llama_cpp import Llama, LlamaRAMCache, StoppingCriteriaList
from llama_cpp.llama_grammar import JSON_GBNF, LlamaGrammar

from eval.llm.qwen_format import END, parse_reply, render_prompt

log = logging.getLogger("eval.llm.server")


class ClientGone(Exception):
    """The client hung up before its reply was ready."""


class BadRequest(Exception):
    def __init__(self, message: str, code: str = "invalid_request") -> None:
        super().__init__(message)
        self.code = code


class PromptCache(LlamaRAMCache):  # type: ignore[misc]  # untyped library
    """llama-cpp-python's RAM cache, its size counted in full.

    Each entry also holds a copy of the logits buffer (512 rows of the 151,936-token
    vocabulary: 311 MB for this model), which the library's count leaves out: bounded
    by llama.cpp's state alone, 4 GB of it held some 60 entries and 18 GB of memory.
    """

    @property
    def cache_size(self) -> int:
        return sum(
            state.llama_state_size + state.scores.nbytes for state in self.cache_state.values()
        )


class ChatEngine:
    """One loaded model; :meth:`complete` answers one chat completion body."""

    def __init__(
        self, model: Path, n_ctx: int, threads: int, name: str, prompt_cache_mb: int = 0
    ) -> None:
        self.llm = Llama(str(model), n_ctx=n_ctx, n_threads=threads, verbose=False)
        if prompt_cache_mb > 0:
            self.llm.set_cache(PromptCache(capacity_bytes=prompt_cache_mb << 20))
        self.n_ctx = n_ctx
        self.name = name
        self.lock = threading.Lock()

    def complete(
        self, body: dict[str, Any], gone: Callable[[], bool] = lambda: False
    ) -> dict[str, Any]:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise BadRequest("messages must be a non-empty list")
        tools = [] if body.get("tool_choice") == "none" else list(body.get("tools") or [])
        tokens = self.llm.tokenize(
            render_prompt(messages, tools).encode(), add_bos=False, special=True
        )
        room = self.n_ctx - len(tokens)
        if room < 16:
            raise BadRequest(
                f"the prompt is {len(tokens)} tokens; this server's context is {self.n_ctx}",
                "context_length_exceeded",
            )
        wanted = body.get("max_tokens") or body.get("max_completion_tokens") or room
        options = {
            "max_tokens": min(int(wanted), room),
            "temperature": float(body.get("temperature") or 0.0),
            "seed": body.get("seed"),
            "stop": [END],
            "stopping_criteria": StoppingCriteriaList([lambda _ids, _logits: gone()]),
        }
        response_format = body.get("response_format")
        started = time.perf_counter()
        with self.lock:
            if gone():
                raise ClientGone
            if _plain_json(response_format):
                out = self._json_object(tokens, options)
            else:
                out = self.llm.create_completion(
                    tokens, grammar=_grammar(response_format), **options
                )
        log.info(
            "%d prompt + %d completion tokens in %.1f s (%s): %r",
            out["usage"]["prompt_tokens"], out["usage"]["completion_tokens"],
            time.perf_counter() - started, out["choices"][0].get("finish_reason"),
            out["choices"][0]["text"][:300],
        )  # fmt: skip
        return self._completion(out, [_name(tool) for tool in tools])

    def _json_object(self, tokens: list[int], options: dict[str, Any]) -> Any:
        """JSON mode: the free reply when it is one JSON object (fences removed), else the
        reply again under llama.cpp's JSON grammar.

        The grammar is checked against Qwen2.5's 151k-token vocabulary at every step:
        on two busy cores a decomposition took 127 s and ran to its 640-token bound
        under it; free, this model writes the object in a few seconds.
        """
        out = self.llm.create_completion(tokens, **options)
        text = _json_text(out["choices"][0]["text"])
        if text is not None:
            out["choices"][0]["text"] = text
            return out
        grammar = LlamaGrammar.from_string(JSON_GBNF, verbose=False)
        again = self.llm.create_completion(tokens, grammar=grammar, **options)
        again["usage"] = _added(out["usage"], again["usage"])
        return again

    def _completion(self, out: Any, names: list[str]) -> dict[str, Any]:
        choice = out["choices"][0]
        parsed = parse_reply(choice["text"], names)
        message: dict[str, Any] = {"role": "assistant", "content": parsed.content}
        finish = choice.get("finish_reason") or "stop"
        if parsed.tool_calls:
            message["tool_calls"] = [call.openai() for call in parsed.tool_calls]
            finish = "tool_calls"
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.name,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": out["usage"],
        }


def _name(tool: dict[str, Any]) -> str:
    return str((tool.get("function") or tool).get("name"))


def _plain_json(response_format: object) -> bool:
    return (
        isinstance(response_format, dict)
        and response_format.get("type") == "json_object"
        and not isinstance(response_format.get("schema"), dict)
    )


def _json_text(text: str) -> str | None:
    """``text`` as one JSON object's text, a code fence around it removed; else None."""
    stripped = text.strip()
    if stripped.startswith("```"):
        stripped = stripped.split("\n", 1)[-1].rsplit("```", 1)[0].strip()
    try:
        value = json.loads(stripped)
    except ValueError:
        return None
    return stripped if isinstance(value, dict) else None


def _added(first: dict[str, int], second: dict[str, int]) -> dict[str, int]:
    return {key: first.get(key, 0) + second.get(key, 0) for key in second}


def _grammar(response_format: object) -> LlamaGrammar | None:
    if not isinstance(response_format, dict):
        return None
    kind = response_format.get("type")
    if kind == "json_object":
        schema = response_format.get("schema")
        if isinstance(schema, dict):
            return LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)
        return LlamaGrammar.from_string(JSON_GBNF, verbose=False)
    if kind == "json_schema":
        schema = (response_format.get("json_schema") or {}).get("schema")
        if not isinstance(schema, dict):
            raise BadRequest("response_format.json_schema.schema must be an object")
        return LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)
    return None


def stream_events(completion: dict[str, Any]) -> list[bytes]:
    """The completion as SSE: the whole message in one chunk, the finish, the usage."""
    choice = completion["choices"][0]
    head = {key: completion[key] for key in ("id", "created", "model")}
    head["object"] = "chat.completion.chunk"
    delta = dict(choice["message"])
    for index, call in enumerate(delta.get("tool_calls") or []):
        call["index"] = index
    chunks = [
        head | {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
        head | {"choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}]},
        head | {"choices": [], "usage": completion["usage"]},
    ]
    return [f"data: {json.dumps(chunk)}\n\n".encode() for chunk in chunks] + [b"data: [DONE]\n\n"]


def _peer_closed(connection: socket.socket) -> Callable[[], bool]:
    """Whether the client has closed its end (checked between decoded tokens: one poll)."""

    def closed() -> bool:
        readable, _, _ = select.select([connection], [], [], 0)
        if not readable:
            return False
        try:
            return connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    return closed


class Handler(BaseHTTPRequestHandler):
    engine: ChatEngine

    def do_GET(self) -> None:
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            self._json(200, {"object": "list", "data": [{"id": self.engine.name}]})
        else:
            self._error(404, f"no route {self.path}", "not_found")

    def do_POST(self) -> None:
        if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
            self._error(404, f"no route {self.path}", "not_found")
            return
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
            gone = _peer_closed(self.connection)
            completion = self.engine.complete(body, gone)
            if gone():
                raise ClientGone
        except ClientGone:
            log.info("dropped a request whose client left")
            return
        except BadRequest as exc:
            self._error(400, str(exc), exc.code)
            return
        except ValueError as exc:
            self._error(400, f"the body is not valid: {exc}", "invalid_request")
            return
        if body.get("stream"):
            self._stream(completion)
        else:
            self._json(200, completion)

    def _stream(self, completion: dict[str, Any]) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        for event in stream_events(completion):
            self.wfile.write(event)

    def _json(self, status: int, payload: object) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, message: str, code: str) -> None:
        kind = "invalid_request_error" if status == HTTPStatus.BAD_REQUEST else "not_found_error"
        self._json(status, {"error": {"message": message, "type": kind, "code": code}})

    def log_message(self, format: str, *args: Any) -> None:
        return  # the eval's own log says what happened


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True, help="the GGUF file")
    parser.add_argument("--name", default="qwen2.5-coder-1.5b", help="the model name served")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--n-ctx", type=int, default=16384, help="context window in tokens")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--prompt-cache-mb", type=int, default=4096,
        help="RAM for the KV state of recent prompts (0: only the last prompt's)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(message)s")
    Handler.engine = ChatEngine(
        args.model, args.n_ctx, args.threads, args.name, args.prompt_cache_mb
    )
    server = ThreadingHTTPServer((args.host, args.port), Handler)
    print(f"serving {args.name} on http://{args.host}:{args.port}/v1", flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
