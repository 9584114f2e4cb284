"""A byte relay to OpenAI-compatible upstreams (OpenAI, vLLM, Ollama's /v1, …).

One relay serves every route that goes upstream as it came: chat completions (the
default ``path``), and the embeddings, completions and moderations routes
(:mod:`proxy.relayed`); :meth:`RelayUpstream.get` reads the upstream's model list.
Requests go out over one shared aiohttp pool of HTTP/1.1 keep-alive connections
(aiohttp, not httpx: on this path it measured 0.12 ms a request against httpx's
0.53 ms; the script, ``eval/bench_http_clients.py``, is in git history). Streamed
events are cut at their blank-line boundaries and passed on unchanged; only an event
that carries ``usage`` is parsed, to count tokens.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

import aiohttp
from yarl import URL

from proxy import json_codec, sse
from proxy.config import TimeoutsSettings
from proxy.context import RequestContext
from proxy.errors import ToolgraphError, UpstreamError, UpstreamTimeout, UpstreamUnreachable
from proxy.upstream.base import FORWARDED_HEADER_PREFIXES, Reply, observe_wait, record_usage
from proxy.upstream.routing import Target

log = logging.getLogger(__name__)

_MAX_ERROR_BODY = 64 * 1024

CHAT_COMPLETIONS = "/chat/completions"

# An answer larger than this (a batch of embeddings: 2,048 inputs of 1,536 floats is
# about 30 MB of JSON) is not decoded to count its tokens: that would hold the loop.
_PARSED_REPLY_BYTES = 64 * 1024
_USAGE = b'"usage":{'  # in the one event of a stream that counts tokens
_TOKEN_COUNT = re.compile(rb'"(prompt_tokens|completion_tokens)"\s*:\s*(\d+)')


def make_session(timeouts: TimeoutsSettings, max_connections: int = 1024) -> aiohttp.ClientSession:
    """The one pool every relayed request shares; call inside the running loop."""
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(
            limit=max_connections, limit_per_host=0, keepalive_timeout=60, ttl_dns_cache=60
        ),
        timeout=aiohttp.ClientTimeout(
            total=None, sock_connect=timeouts.upstream_connect, sock_read=timeouts.upstream_read
        ),
        auto_decompress=False,
        skip_auto_headers=("User-Agent",),
        trust_env=False,
    )


class RelayUpstream:
    def __init__(self, session: aiohttp.ClientSession) -> None:
        self._session = session

    async def complete(
        self,
        target: Target,
        body: dict[str, Any],
        raw: bytes | None,
        context: RequestContext,
        path: str = CHAT_COMPLETIONS,
    ) -> Reply:
        """The upstream's whole answer to a ``POST`` of the body to ``path``."""
        return await self._whole(
            self._request(target, path, context, _content(body, raw)), target, context
        )

    async def get(self, target: Target, path: str, context: RequestContext) -> Reply:
        """The upstream's whole answer to a ``GET`` of ``path`` (its model list)."""
        return await self._whole(self._request(target, path, context), target, context)

    async def delete(self, target: Target, path: str, context: RequestContext) -> Reply:
        """The upstream's whole answer to a ``DELETE`` of ``path`` (a stored response)."""
        request = self._request(target, path, context, method="DELETE")
        return await self._whole(request, target, context)

    async def _whole(self, request: Any, target: Target, context: RequestContext) -> Reply:
        started = time.perf_counter()
        try:
            async with request as response:
                content = await response.read()
        except (TimeoutError, aiohttp.ClientError) as exc:
            observe_wait(target.label, started, context, "error")
            raise translate(exc, target) from None
        observe_wait(target.label, started, context, str(response.status))
        if response.status >= 400:
            raise error_from_response(response.status, content, response.headers)
        _count_usage(target.label, content)
        return Reply(content, forwarded_headers(response.headers))

    async def stream(
        self,
        target: Target,
        body: dict[str, Any],
        raw: bytes | None,
        context: RequestContext,
        path: str = CHAT_COMPLETIONS,
    ) -> RelayStream:
        """A started stream of the upstream's events, ``POST``ed to ``path``."""
        started = time.perf_counter()
        try:
            response = await self._request(target, path, context, _content(body, raw))
        except (TimeoutError, aiohttp.ClientError) as exc:
            observe_wait(target.label, started, context, "error")
            raise translate(exc, target) from None
        observe_wait(target.label, started, context, str(response.status))
        if response.status >= 400:
            try:
                content = await response.content.read(_MAX_ERROR_BODY)
            except (TimeoutError, aiohttp.ClientError) as exc:
                raise translate(exc, target) from None
            finally:
                response.close()
            raise error_from_response(response.status, content, response.headers)
        return RelayStream(response, target)

    async def aclose(self) -> None:
        await self._session.close()

    def _request(
        self,
        target: Target,
        path: str,
        context: RequestContext,
        content: bytes | None = None,
        method: str = "GET",
    ) -> Any:
        """A ``POST`` of ``content`` to ``path`` under the target's base URL, or a bodiless
        ``method``."""
        headers = {"Accept-Encoding": "identity"}
        if content is not None:
            headers = {"Content-Type": "application/json", **headers}
        if (request_id := context.upstream_request_id()) is not None:
            headers["X-Request-Id"] = request_id
        key = target.api_key or context.client_key
        if key:
            headers["Authorization"] = f"Bearer {key}"
        url = URL(f"{target.base_url}{path}", encoded=True)
        if content is None:
            return self._session.request(method, url, headers=headers)
        return self._session.post(url, data=content, headers=headers)


class RelayStream:
    """The upstream's SSE events, re-cut at event boundaries, bytes unchanged."""

    def __init__(self, response: aiohttp.ClientResponse, target: Target) -> None:
        self._response = response
        self._target = target
        self.headers = forwarded_headers(response.headers)

    async def __aiter__(self) -> AsyncIterator[bytes]:
        cutter = sse.EventCutter()
        finished = False
        try:
            async for chunk in self._response.content.iter_any():
                events = cutter.feed(chunk)
                if not events:
                    continue
                finished = finished or sse.ends_stream(events)
                if _USAGE in events:
                    _count_stream_usage(self._target.label, events)
                yield events
            if last := cutter.rest():  # a last event without its blank line
                finished = finished or sse.ends_stream(last)
                yield last
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise translate(exc, self._target, mid_stream=True) from None
        finally:
            await self.aclose()
        if not finished:
            raise UpstreamUnreachable(
                "the upstream ended the stream before [DONE]", code="upstream_stream_truncated"
            )

    async def aclose(self) -> None:
        self._response.close()


def translate(
    exc: aiohttp.ClientError | TimeoutError, target: Target, mid_stream: bool = False
) -> ToolgraphError:
    """aiohttp's exceptions, as toolgraph's; the only place that knows aiohttp's tree."""
    where = "while streaming" if mid_stream else "before answering"
    host = URL(target.base_url or "").host or "the upstream"
    if isinstance(exc, TimeoutError):  # aiohttp's timeouts subclass it
        return UpstreamTimeout(f"the upstream at {host} timed out {where}")
    log.warning("upstream %s failed %s: %r", host, where, exc)
    return UpstreamUnreachable(f"the upstream at {host} could not be reached or broke off {where}")


def error_from_response(status: int, content: bytes, headers: Mapping[str, str]) -> UpstreamError:
    """The upstream's own error: its status, type, code, param, message and retry headers."""
    try:
        payload = json_codec.loads(content)
    except json_codec.DecodeError:
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


def forwarded_headers(headers: Mapping[str, str]) -> dict[str, str]:
    return {
        k.lower(): v for k, v in headers.items() if k.lower().startswith(FORWARDED_HEADER_PREFIXES)
    }


def _content(body: dict[str, Any], raw: bytes | None) -> bytes:
    return raw if raw is not None else json_codec.dumps(body)


def _str_or_none(value: object) -> str | None:
    return str(value) if value is not None else None


def _count_usage(model: str, content: bytes) -> None:
    if len(content) > _PARSED_REPLY_BYTES:
        record_usage(model, _usage_in_tail(content))
        return
    try:
        usage = json_codec.loads(content).get("usage")
    except (json_codec.DecodeError, AttributeError):
        return
    record_usage(model, usage)


def _usage_in_tail(content: bytes) -> dict[str, int]:
    """The token counts of a large answer's last ``usage``, read without decoding the
    rest: a key's quotes cannot occur unescaped inside a JSON string."""
    start = content.rfind(b'"usage":')
    if start < 0:
        return {}
    return {m[1].decode(): int(m[2]) for m in _TOKEN_COUNT.finditer(content, start, start + 1024)}


def _count_stream_usage(model: str, events: bytes) -> None:
    for data in sse.data_fields_with(events, _USAGE):
        if data.startswith(b"{") and _USAGE in data:
            try:
                record_usage(model, json_codec.loads(data).get("usage"))
            except (json_codec.DecodeError, AttributeError):
                continue
