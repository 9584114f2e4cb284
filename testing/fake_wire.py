"""HTTP/1.1 on an asyncio stream, as much as the fake servers need: a request's body,
a whole response, a chunked stream of SSE events, and a connection broken on purpose."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson

from testing.fake_script import Script

REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    429: "Too Many Requests",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


async def read_body(reader: asyncio.StreamReader, headers: dict[str, str]) -> bytes:
    if "content-length" in headers:
        return await reader.readexactly(int(headers["content-length"]))
    if headers.get("transfer-encoding", "").lower() == "chunked":
        parts = []
        while size := int((await reader.readuntil(b"\r\n")).split(b";")[0], 16):
            parts.append(await reader.readexactly(size))
            await reader.readexactly(2)
        await reader.readuntil(b"\r\n")
        return b"".join(parts)
    return b""


async def send_json(
    writer: asyncio.StreamWriter, status: int, payload: Any, headers: dict[str, str] | None = None
) -> None:
    await send(writer, status, orjson.dumps(payload), "application/json", headers or {})


async def send(
    writer: asyncio.StreamWriter,
    status: int,
    body: bytes,
    content_type: str,
    headers: dict[str, str],
) -> None:
    head = f"HTTP/1.1 {status} {REASONS.get(status, 'Status')}\r\n"
    head += f"content-type: {content_type}\r\ncontent-length: {len(body)}\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    writer.write(head.encode() + b"\r\n" + body)
    await writer.drain()


async def drop(writer: asyncio.StreamWriter, script: Script) -> None:
    """Break the connection (a reset, no terminating chunk), once the test says so."""
    await writer.drain()
    if script.drop_when is not None:
        await asyncio.to_thread(script.drop_when.wait, 60)
    writer.transport.abort()
