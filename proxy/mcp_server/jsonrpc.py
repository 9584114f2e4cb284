"""What ``/mcp`` checks before the MCP SDK sees a request: the JSON-RPC envelope.

The SDK reads a message it cannot type as a request (an object as ``id``, say) as a
notification, answers 202 with no body and drops it; a client then waits for an answer
that never comes. Every POSTed message is checked here first and a malformed one gets
a JSON-RPC error (-32700 for JSON that does not parse, -32600 for anything else) with
a 400. A ``GET``, which opens a stream for the server's own messages, is a 405: the
stateless server has nothing to send on one, and each held a connection forever.
"""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse, Response

from proxy import json_codec

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
NO_STREAM = -32000  # the SDK's own code for an HTTP-level refusal


def envelope_problem(message: Any) -> str | None:
    """What is wrong with one JSON-RPC message a client sent, or None."""
    if not isinstance(message, dict):
        return f"a message must be a JSON object, not {_kind(message)}"
    if message.get("jsonrpc") != "2.0":
        return 'jsonrpc must be "2.0"'
    if "id" in message and not _valid_id(message["id"], answer="error" in message):
        return f"id must be a string or an integer, not {_kind(message['id'])}"
    if "method" in message:
        if not isinstance(message["method"], str) or not message["method"]:
            return "method must be a non-empty string"
        return None
    if "result" not in message and "error" not in message:
        return "a message needs a method (a request or a notification), or a result or an error"
    if "id" not in message:
        return "a result or an error needs the id of the request it answers"
    return None


def check_body(raw: bytes) -> Response | None:
    """The error response for a POSTed body that is not one well-formed message, or None."""
    try:
        message = json_codec.loads(raw)
    except json_codec.DecodeError as exc:
        return error_response(PARSE_ERROR, f"Parse error: {exc.msg}", 400)
    problem = envelope_problem(message)
    if problem is None:
        return None
    request_id = message.get("id") if isinstance(message, dict) else None
    request_id = request_id if _valid_id(request_id, answer=False) else None
    return error_response(INVALID_REQUEST, f"Invalid Request: {problem}", 400, request_id)


def no_stream() -> Response:
    """The answer to ``GET /mcp``: no stream is offered."""
    message = "Method Not Allowed: this server is stateless and opens no stream; POST messages"
    response = error_response(NO_STREAM, message, 405)
    response.headers["allow"] = "POST, DELETE"
    return response


def error_response(
    code: int, message: str, status: int, request_id: str | int | None = None
) -> Response:
    body = {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}
    return JSONResponse(body, status_code=status)


def _valid_id(value: Any, *, answer: bool) -> bool:
    if value is None:
        return answer  # an error about a request that could not be read has a null id
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _kind(value: Any) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}
    if value is None:
        return "null"
    if isinstance(value, int | float) and not isinstance(value, bool):
        return "a number"
    return names.get(type(value), type(value).__name__)
