"""An OpenAPI document fetched from a URL for the registry (``openapi_url``).

The document is read with the HTTP client the catalog's tools share, so the host
allow-list and the refusal of private addresses apply to it on every hop, as they
do to a tool's call: a document's URL is a way into the network like an endpoint
is. It is capped at the size of a request body, since a pasted document is too.
JSON or YAML (YAML without aliases, whose expansion could be made to blow up).
A relative ``servers`` URL, or none (which OpenAPI reads as ``/``), is taken
against the document's own URL, as the specification says.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any
from urllib.parse import urljoin, urlsplit

import httpx
import yaml
from pydantic import JsonValue

from proxy import json_codec
from proxy.errors import EgressDenied, InvalidRequest


class OpenApiFetcher:
    """GET an OpenAPI document through ``client`` (an egress-policed one), at most
    ``max_bytes`` of it."""

    def __init__(self, client: httpx.AsyncClient, max_bytes: int) -> None:
        self._client = client
        self._max_bytes = max_bytes

    async def fetch(self, url: str) -> dict[str, JsonValue]:
        """The document at ``url``, its servers made absolute; :class:`InvalidRequest`
        (422, ``openapi_unreachable``) when it cannot be read, (400, ``invalid_tool``)
        when what came is no JSON or YAML mapping."""
        if urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).hostname:
            raise InvalidRequest(
                f"openapi_url must be an http or https URL, not {url!r}",
                param="openapi_url",
                code="invalid_tool",
            )
        content = await self._read(url)
        document = await asyncio.to_thread(_load, content, url)
        return anchored(document, url)

    async def _read(self, url: str) -> bytes:
        try:
            async with self._client.stream("GET", url) as response:
                if response.status_code >= 400:
                    raise _unfetched(url, f"it answered HTTP {response.status_code}")
                chunks, size = [], 0
                async for chunk in response.aiter_bytes():
                    size += len(chunk)
                    if size > self._max_bytes:
                        raise _unfetched(url, f"the document passed {self._max_bytes} bytes")
                    chunks.append(chunk)
                return b"".join(chunks)
        except EgressDenied as exc:
            raise _unfetched(url, f"the egress policy refuses it: {exc.message}") from None
        except httpx.TimeoutException:
            raise _unfetched(url, "it did not answer in time") from None
        except httpx.HTTPError as exc:
            raise _unfetched(url, f"cannot reach it ({type(exc).__name__})") from None


def _unfetched(url: str, why: str) -> InvalidRequest:
    return InvalidRequest(
        f"cannot fetch the OpenAPI document at {url}: {why}",
        param="openapi_url",
        code="openapi_unreachable",
        status=422,
    )


class _NoAliases(yaml.SafeLoader):
    """YAML's safe loader, refusing anchors' aliases (a few lines of them can stand
    for billions of nodes once walked)."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            raise yaml.YAMLError("YAML aliases are not accepted")
        return super().compose_node(parent, index)


def _load(content: bytes, url: str) -> dict[str, JsonValue]:
    try:
        value: object = json_codec.loads(content)
    except ValueError:
        try:
            loaded = yaml.load(content, Loader=_NoAliases)  # a SafeLoader, without aliases
        except yaml.YAMLError as exc:
            raise _not_a_document(url, f"neither JSON nor YAML ({exc})") from None
        # YAML dates and the like become strings: the document must be JSON
        value = json.loads(json.dumps(loaded, default=str))
    if not isinstance(value, dict):
        raise _not_a_document(url, "not a JSON or YAML mapping")
    return value


def _not_a_document(url: str, why: str) -> InvalidRequest:
    return InvalidRequest(
        f"{url} is not an OpenAPI document: {why}", param="openapi_url", code="invalid_tool"
    )


def anchored(document: dict[str, JsonValue], url: str) -> dict[str, JsonValue]:
    """``document`` with each server URL absolute, taken against ``url`` (no servers:
    ``/``, the document's own origin)."""
    servers = document.get("servers")
    if not isinstance(servers, list) or not servers:
        servers = [{"url": "/"}]
    absolute: list[JsonValue] = [
        {**server, "url": urljoin(url, str(server.get("url") or "/"))}
        if isinstance(server, dict)
        else server
        for server in servers
    ]
    return {**document, "servers": absolute}
