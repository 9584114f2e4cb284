"""Select mode's embeddings shared through Redis: a process finds another's vectors."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from functools import partial

from redis.asyncio import Redis

from proxy.config import Settings
from proxy.context import RequestContext
from proxy.encoder.service import EncoderService
from proxy.protocol.chat import parse_request
from proxy.select.service import SelectService
from tests.retriever.client_tools import client_tools

_OTHER_PROCESS = """
import asyncio, json, sys
from redis.asyncio import Redis
from proxy.config import Settings
from proxy.context import RequestContext
from proxy.protocol.chat import parse_request
from proxy.encoder.service import EncoderService
from proxy.select.service import SelectService

async def main():
    redis = Redis.from_url(sys.argv[1])
    encoders = EncoderService(Settings().retriever, redis)
    select = SelectService(Settings().retriever, encoders, redis)
    request = json.loads(sys.argv[2])
    await select.rewrite(parse_request(request), request, RequestContext("other"))
    print((await encoders.encoder()).counts.texts)
    encoders.close()
    await redis.aclose()

asyncio.run(main())
"""


def _request() -> dict[str, object]:
    return {
        "model": "m",
        "messages": [{"role": "user", "content": "book a flight to Rome"}],
        "tools": client_tools()[:40],
        "toolgraph": {"mode": "select", "top_k": 3},
    }


async def test_a_second_process_finds_the_tools_vectors_in_redis(redis_server: str) -> None:
    redis = Redis.from_url(redis_server)
    await redis.flushdb()
    request = _request()
    argv = [sys.executable, "-c", _OTHER_PROCESS, redis_server, json.dumps(request)]
    run = partial(subprocess.run, capture_output=True, text=True, timeout=600, check=True)
    first = await asyncio.to_thread(run, argv)
    assert int(first.stdout.split()[-1]) >= 41  # it embedded the 40 tools and the question
    encoders = EncoderService(Settings().retriever, redis)  # its own, empty in-process cache
    select = SelectService(Settings().retriever, encoders, redis)
    encoder = await encoders.encoder()
    before = encoder.counts.texts

    body = await select.rewrite(parse_request(request), request, RequestContext("test"))

    assert encoder.counts.texts == before  # every vector came from Redis
    assert len(body["tools"]) == 3
    encoders.close()
    await redis.aclose()
