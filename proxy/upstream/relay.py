"""A byte relay to OpenAI-compatible upstreams (OpenAI, vLLM, Ollama's /v1, …).

Requests go out over one shared httpx pool of HTTP/1.1 keep-alive connections.
Streamed events are cut at their blank-line boundaries and passed on unchanged;
only an event that carries ``usage`` is parsed, to count tokens.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson

from proxy.config import Timeouts
from proxy.context import RequestContext
from proxy.errors import ToolgraphError, UpstreamError, UpstreamTimeout, UpstreamUnreachable
from proxy.upstream.base import FORWARDED_HEADER_PREFIXES, Reply, observe_wait, record_usage
from proxy.upstream.routing import Target

log = logging.getLogger(__name__)

_DONE = b"data: [DONE]"
_MAX_ERROR_BODY = 64 * 1024


def make_client(timeouts: Timeouts, max_connections: int = 1024) -> httpx.AsyncClient:
    """The one pool every relayed request shares."""
    return httpx.AsyncClient(
        http1=True,
        http2=False,
        timeout=httpx.Timeout(
            connect=timeouts.upstream_connect,
            read=timeouts.upstream_read,
            write=timeouts.upstream_read,
            pool=timeouts.upstream_connect,
        ),
        limits=httpx.Limits(
            max_connections=max_connections,
            max_keepalive_connections=max_connections,
            keepalive_expiry=60,
        ),
        follow_redirects=False,
        trust_env=False,
    )


class RelayUpstream:
    def __init__(self, client: httpx.AsyncClient) -> None:
        self._client = client

    async def complete(
        self, target: Target, body: dict[str, Any], raw: bytes | None, context: RequestContext
    ) -> Reply:
        request = self._build(target, body, raw, context)
        started = time.perf_counter()
        try:
            response = await self._client.send(request)
        except httpx.HTTPError as exc:
            observe_wait(target.model, started, context, "error")
            raise translate(exc, target) from None
        observe_wait(target.model, started, context, str(response.status_code))
        if response.status_code >= 400:
            raise error_from_response(response.status_code, response.content, response.headers)
        _count_usage(target.model, response.content)
        return Reply(response.content, forwarded_headers(response.headers))

    async def stream(
        self, target: Target, body: dict[str, Any], raw: bytes | None, context: RequestContext
    ) -> RelayStream:
        request = self._build(target, body, raw, context)
        started = time.perf_counter()
        try:
            response = await self._client.send(request, stream=True)
        except httpx.HTTPError as exc:
            observe_wait(target.model, started, context, "error")
            raise translate(exc, target) from None
        observe_wait(target.model, started, context, str(response.status_code))
        if response.status_code >= 400:
            try:
                content = await _read_capped(response)
            finally:
                await response.aclose()
            raise error_from_response(response.status_code, content, response.headers)
        return RelayStream(response, target)

    async def aclose(self) -> None:
        await self._client.aclose()

    def _build(
        self, target: Target, body: dict[str, Any], raw: bytes | None, context: RequestContext
    ) -> httpx.Request:
        headers = {
            "content-type": "application/json",
            "accept-encoding": "identity",
            "x-request-id": context.request_id,
        }
        key = target.api_key or context.client_key
        if key:
            headers["authorization"] = f"Bearer {key}"
        content = raw if raw is not None else orjson.dumps(body)
        return self._client.build_request(
            "POST", f"{target.base_url}/chat/completions", content=content, headers=headers
        )


class RelayStream:
    """The upstream's SSE events, re-cut at event boundaries, bytes unchanged."""

    def __init__(self, response: httpx.Response, target: Target) -> None:
        self._response = response
        self._target = target
        self.headers = forwarded_headers(response.headers)

    async def __aiter__(self) -> AsyncIterator[bytes]:
        pending = b""
        finished = False
        try:
            async for chunk in self._response.aiter_bytes():
                if b"\r" in chunk:
                    chunk = chunk.replace(b"\r\n", b"\n")
                pending += chunk
                cut = pending.rfind(b"\n\n")
                if cut < 0:
                    continue
                events, pending = pending[: cut + 2], pending[cut + 2 :]
                finished = finished or _DONE in events
                if b'"usage":{' in events:
                    _count_stream_usage(self._target.model, events)
                yield events
            if pending.strip():  # a last event without its blank line
                finished = finished or _DONE in pending
                yield pending.rstrip(b"\n") + b"\n\n"
        except httpx.HTTPError as exc:
            raise translate(exc, self._target, mid_stream=True) from None
        finally:
            await self.aclose()
        if not finished:
            raise UpstreamUnreachable(
                "the upstream ended the stream before [DONE]", code="upstream_stream_truncated"
            )

    async def aclose(self) -> None:
        await self._response.aclose()


def translate(exc: httpx.HTTPError, target: Target, mid_stream: bool = False) -> ToolgraphError:
    """httpx's exceptions, as toolgraph's; the only place that knows httpx's tree."""
    where = "while streaming" if mid_stream else "before answering"
    host = httpx.URL(target.base_url or "").host or "the upstream"
    if isinstance(exc, httpx.TimeoutException):
        return UpstreamTimeout(f"the upstream at {host} timed out {where}")
    log.warning("upstream %s failed %s: %r", host, where, exc)
    return UpstreamUnreachable(f"the upstream at {host} could not be reached or broke off {where}")


def error_from_response(status: int, content: bytes, headers: httpx.Headers) -> UpstreamError:
    """The upstream's own error: its status, type, code, param, message and retry headers."""
    try:
        payload = orjson.loads(content)
    except orjson.JSONDecodeError:
        payload = None
    detail = payload.get("error") if isinstance(payload, dict) else None
    if isinstance(detail, str):
        detail = {"message": detail}
    if not isinstance(detail, dict):
        text = content[:500].decode("utf-8", "replace").strip() or "no detail"
        return UpstreamError(
            f"the upstream answered {status}: {text}",
            status=status,
            headers=forwarded_headers(headers),
        )
    message = detail.get("message")
    return UpstreamError(
        message if isinstance(message, str) else f"the upstream answered {status}",
        status=status,
        type=_str_or_none(detail.get("type")) or "upstream_error",
        code=_str_or_none(detail.get("code")),
        param=_str_or_none(detail.get("param")),
        headers=forwarded_headers(headers),
    )


def forwarded_headers(headers: httpx.Headers) -> dict[str, str]:
    return {k: v for k, v in headers.items() if k.startswith(FORWARDED_HEADER_PREFIXES)}


def _str_or_none(value: object) -> str | None:
    return str(value) if value is not None else None


async def _read_capped(response: httpx.Response) -> bytes:
    content = b""
    async for chunk in response.aiter_bytes():
        content += chunk
        if len(content) > _MAX_ERROR_BODY:
            break
    return content


def _count_usage(model: str, content: bytes) -> None:
    try:
        usage = orjson.loads(content).get("usage")
    except (orjson.JSONDecodeError, AttributeError):
        return
    record_usage(model, usage)


def _count_stream_usage(model: str, events: bytes) -> None:
    for event in events.split(b"\n\n"):
        if event.startswith(b"data: {") and b'"usage":{' in event:
            try:
                record_usage(model, orjson.loads(event[6:]).get("usage"))
            except (orjson.JSONDecodeError, AttributeError):
                continue
