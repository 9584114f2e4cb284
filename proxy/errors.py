"""toolgraph's errors, and the one place that renders them in OpenAI's shape.

ToolgraphError                 status, type, code, param: what the client sees
 ├── InvalidRequest            400 invalid_request_error: bad JSON, missing or mistyped fields
 ├── RequestTooLarge           413 invalid_request_error
 ├── AuthenticationFailed      401 authentication_error
 ├── NotFound                  404 not_found_error (routes, unknown models)
 ├── Forbidden                 403 permission_error (a disabled or admin-only API, a
 │                             foreign Host or a cross-site page at an open proxy)
 ├── UnsupportedMediaType      415 invalid_request_error (a body an open proxy reads only as JSON)
 ├── Conflict                  409 conflict_error (a name another tool holds)
 ├── RateLimited               429 requests / rate_limit_exceeded: a key's limit, with retry-after
 ├── ClientClosedRequest       499, for the metrics only: nobody is left to read it
 ├── UpstreamError             the upstream's own status, type, code and message
 │    ├── UpstreamUnreachable  502 (connection refused, reset, protocol error)
 │    ├── UpstreamTimeout      504 (no answer within the configured time)
 │    └── ModelCallsSpent      503 (an orchestrated request's bound on model calls before
 │                             its answer is reached: planning and argument writing stop)
 ├── ToolError                 502 tool_error: a tool call the proxy made failed
 │    ├── ToolHttpStatus       502 (the tool answered an HTTP error status, kept in http_status)
 │    ├── ToolTimeout          504 (the call or the request's deadline ran out)
 │    ├── ToolUnavailable      502 (the tool cannot be called at all: its host unreachable,
 │    │                        its transport not enabled, its credential unset)
 │    ├── ToolInputRejected    400 (arguments a tool refuses: hostile, too large, invalid)
 │    ├── MissingArguments     400 (a required value only the user can give: ask them)
 │    ├── ToolResponseTooLarge 502 (the response passed the size cap)
 │    ├── DestructiveRefused   409 (a destructive tool in a request without Idempotency-Key)
 │    └── EgressDenied         403 (the egress policy refuses the host or its address)
 ├── StoreUnavailable          503 store_unavailable: Redis cannot be reached (nothing ran)
 ├── StoreFull                 503 store_full: a store that must not forget is full
 │    └── TenantStoreFull      503 store_full: one tenant's share is full, not the others'
 └── InternalError             500, never with details

Third-party exceptions (httpx, litellm, redis) are translated where they enter, in
``proxy.upstream``, ``proxy.execute.invocation`` and ``proxy.kv``; everything above
raises only these.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable
from typing import Any

from proxy import json_codec, sse


class ToolgraphError(Exception):
    status = 500
    type = "server_error"
    code: str | None = None

    def __init__(
        self,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        status: int | None = None,
        type: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        if code is not None:
            self.code = code
        if status is not None:
            self.status = status
        if type is not None:
            self.type = type
        self.headers = headers or {}

    def to_dict(self, secrets: Iterable[str] = ()) -> dict[str, Any]:
        """OpenAI's error object, with any of ``secrets`` masked out of every field.

        An upstream's error fills all four, and any of them may echo a key.
        """
        secrets = tuple(secrets)
        fields = {"message": self.message, "type": self.type, "param": self.param}
        fields["code"] = self.code
        return {
            "error": {
                name: redact(value, secrets) if value is not None else None
                for name, value in fields.items()
            }
        }

    def to_json(self, secrets: Iterable[str] = ()) -> bytes:
        return json_codec.dumps(self.to_dict(secrets))

    def to_sse(self, secrets: Iterable[str] = ()) -> bytes:
        """The error as the last event of a stream that has already started."""
        return sse.data_event(self.to_json(secrets))


class InvalidRequest(ToolgraphError):
    status = 400
    type = "invalid_request_error"


class RequestTooLarge(ToolgraphError):
    status = 413
    type = "invalid_request_error"
    code = "request_too_large"


class AuthenticationFailed(ToolgraphError):
    status = 401
    type = "authentication_error"
    code = "invalid_api_key"


class NotFound(ToolgraphError):
    status = 404
    type = "not_found_error"


class Forbidden(ToolgraphError):
    status = 403
    type = "permission_error"


class UnsupportedMediaType(ToolgraphError):
    status = 415
    type = "invalid_request_error"
    code = "unsupported_media_type"


class Conflict(ToolgraphError):
    status = 409
    type = "conflict_error"


class RateLimited(ToolgraphError):
    """A key over one of its limits: OpenAI's 429, ``retry-after`` in whole seconds."""

    status = 429
    type = "requests"
    code = "rate_limit_exceeded"

    def __init__(
        self, message: str, *, retry_after: int, code: str | None = None, param: str | None = None
    ) -> None:
        super().__init__(message, code=code, param=param, headers={"retry-after": str(retry_after)})


class ClientClosedRequest(ToolgraphError):
    status = 499
    type = "client_closed_request"
    code = "client_closed_request"


class UpstreamError(ToolgraphError):
    status = 502
    type = "upstream_error"


class UpstreamUnreachable(UpstreamError):
    status = 502
    code = "upstream_unreachable"


class UpstreamTimeout(UpstreamError):
    status = 504
    code = "upstream_timeout"


class ModelCallsSpent(UpstreamError):
    """An orchestrated request asked the model as often as ``orchestrate.max_model_calls``
    allows before its answer: the stage that meets it degrades (the planner to its
    LLM-free policy, an unwritten call fails), and the answer is still asked."""

    status = 503
    code = "model_calls_spent"


class ToolError(ToolgraphError):
    """A tool call failed; ``param`` names the tool when known."""

    status = 502
    type = "tool_error"
    code = "tool_failed"


class ToolHttpStatus(ToolError):
    def __init__(self, http_status: int, message: str, *, param: str | None = None) -> None:
        super().__init__(message, param=param)
        self.http_status = http_status


class ToolTimeout(ToolError):
    status = 504
    code = "tool_timeout"


class ToolUnavailable(ToolError):
    """The tool cannot be called whatever its arguments: no route to its host, its
    transport (HTTP, MCP) not enabled, its credential not set."""

    code = "tool_unavailable"


class ToolInputRejected(ToolError):
    status = 400
    code = "invalid_tool_input"


class MissingArguments(ToolError):
    """A required argument that neither the request nor earlier calls can supply."""

    status = 400
    code = "missing_arguments"

    def __init__(self, message: str, *, question: str, missing: list[str], tool: str) -> None:
        super().__init__(message, param=tool)
        self.question = question
        self.missing = missing


class ToolResponseTooLarge(ToolError):
    code = "tool_response_too_large"


class DestructiveRefused(ToolError):
    """A tool marked destructive, in a request that may be retried (no Idempotency-Key)."""

    status = 409
    code = "destructive_tool_refused"


class EgressDenied(ToolError):
    status = 403
    code = "egress_denied"


class StoreUnavailable(ToolgraphError):
    """A store of records (``proxy.kv``) cannot be reached; raised where redis' errors enter."""

    status = 503
    type = "server_error"
    code = "store_unavailable"


class StoreFull(ToolgraphError):
    """A bounded store (``proxy.kv``) has no room: a value over its bound, or a new key
    in a store that must keep its entries to their TTL."""

    status = 503
    type = "server_error"
    code = "store_full"


class TenantStoreFull(StoreFull):
    """One tenant's share of a bounded store is full; other tenants still have room."""


class InternalError(ToolgraphError):
    status = 500
    type = "server_error"
    code = "internal_error"


def redact_headers(
    headers: Iterable[tuple[bytes, bytes]], secrets: tuple[str, ...]
) -> list[tuple[bytes, bytes]]:
    """ASGI response headers with :func:`redact` applied to every value."""
    found = _prefixes(secrets)
    if found is None:
        return list(headers)
    return [
        (name, _redact_bytes(value, secrets) if found(value) else value) for name, value in headers
    ]


@functools.cache
def _prefixes(secrets: tuple[str, ...]) -> Callable[[bytes], re.Match[bytes] | None] | None:
    # Every response passes here: one search per header, compiled once per key set.
    prefixes = [re.escape(secret[:6].encode()) for secret in secrets if len(secret) >= 8]
    return re.compile(b"|".join(prefixes)).search if prefixes else None


def _redact_bytes(value: bytes, secrets: Iterable[str]) -> bytes:
    return redact(value.decode("latin-1"), secrets).encode("latin-1")


def redact(text: str, secrets: Iterable[str]) -> str:
    """Mask every word of ``text`` that begins like one of ``secrets``.

    Providers echo keys back in their errors, usually cut short ("sk-abc12...wxyz"),
    so a word is masked when it shares a secret's first six characters.
    """
    for secret in secrets:
        if len(secret) >= 8 and secret[:6] in text:
            text = re.sub(re.escape(secret[:6]) + r"[^\s\"',]*", "***", text)
    return text
