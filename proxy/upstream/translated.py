"""Upstreams that do not speak OpenAI's API, through litellm's translation.

litellm is imported on first use: it takes seconds to import, and a deployment
whose routes all relay never needs it.
"""

from __future__ import annotations

import sys
import time
from collections.abc import AsyncIterator
from typing import Any

from proxy import json_codec, sse
from proxy.context import RequestContext
from proxy.errors import UpstreamError, UpstreamTimeout, UpstreamUnreachable
from proxy.upstream.base import Reply, observe_wait, record_usage
from proxy.upstream.routing import Target

# Fields litellm adds to its response objects that OpenAI's API does not have.
_LITELLM_EXTRAS = ("provider_specific_fields", "citations", "service_tier")


def load_litellm() -> Any:
    import litellm

    return litellm


class LiteLLMUpstream:
    def __init__(self, timeout: float) -> None:
        self._timeout = timeout

    async def complete(
        self, target: Target, body: dict[str, Any], raw: bytes | None, context: RequestContext
    ) -> Reply:
        started = time.perf_counter()
        response = await self._call(target, body, context, started)
        payload = _clean(response.model_dump())
        record_usage(target.label, payload.get("usage"))
        return Reply(json_codec.dumps(payload))

    async def stream(
        self, target: Target, body: dict[str, Any], raw: bytes | None, context: RequestContext
    ) -> TranslatedStream:
        started = time.perf_counter()
        response = await self._call(target, body, context, started)
        return TranslatedStream(response, target)

    async def aclose(self) -> None:
        """Close the HTTP sessions litellm caches per event loop, if it was ever used."""
        if sys.modules.get("litellm") is not None:  # imported (None: hidden, as uninstalled)
            from litellm.llms.custom_httpx.async_client_cleanup import (
                close_litellm_async_clients,
            )

            await close_litellm_async_clients()

    async def _call(
        self, target: Target, body: dict[str, Any], context: RequestContext, started: float
    ) -> Any:
        litellm = load_litellm()
        arguments = {
            **body,
            "model": target.litellm_model,
            "timeout": self._timeout,
            # litellm would otherwise look for MCP servers among the tools (and import
            # the `mcp` package to do it); toolgraph's tools are the client's business.
            "_skip_mcp_handler": True,
        }
        if target.base_url:
            arguments["api_base"] = target.base_url
        key = target.api_key or context.client_key
        if key:
            arguments["api_key"] = key
        try:
            response = await litellm.acompletion(**arguments)
        except Exception as exc:  # litellm's tree, translated in one place
            observe_wait(target.label, started, context, "error")
            raise translate(exc) from None
        observe_wait(target.label, started, context, "200")
        return response


class TranslatedStream:
    """litellm's chunk objects, serialised as OpenAI's SSE events."""

    def __init__(self, response: Any, target: Target) -> None:
        self._response = response
        self._target = target
        self.headers: dict[str, str] = {}

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._response:
                payload = _clean(chunk.model_dump())
                if payload.get("usage"):
                    record_usage(self._target.label, payload["usage"])
                yield sse.json_event(payload)
        except Exception as exc:
            raise translate(exc) from None
        yield sse.DONE

    async def aclose(self) -> None:
        close = getattr(self._response, "aclose", None)
        if close is not None:
            await close()


def translate(exc: Exception) -> UpstreamError:
    litellm = load_litellm()
    message = str(getattr(exc, "message", "") or exc) or type(exc).__name__
    if isinstance(exc, litellm.Timeout):
        return UpstreamTimeout(f"the upstream timed out: {message}")
    if isinstance(exc, litellm.APIConnectionError):
        return UpstreamUnreachable(f"the upstream could not be reached: {message}")
    status = getattr(exc, "status_code", None)
    if isinstance(status, int) and 400 <= status < 600:
        return UpstreamError(message, status=status, code=getattr(exc, "code", None))
    return UpstreamUnreachable(f"the upstream call failed: {message}")


def _clean(payload: dict[str, Any]) -> dict[str, Any]:
    for key in _LITELLM_EXTRAS:
        payload.pop(key, None)
    for choice in payload.get("choices") or ():
        for part in ("message", "delta"):
            if isinstance(choice.get(part), dict):
                for key in _LITELLM_EXTRAS:
                    choice[part].pop(key, None)
    return payload
