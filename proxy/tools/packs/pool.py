"""The threads the packs' blocking calls run in: a pool of their own.

The database drivers and the embedded RDF store block, so each call hops to a thread.
Not asyncio's default pool: that one also serves the event loop's other hops (body
parsing, retrieval, store reads), and slow SQL reached through ``/mcp`` filled it, so an
orchestrate request waited for threads (6.0 s became 11.9 s). Here at most
:data:`PACK_THREADS` pack calls run at once; more wait their turn in the pool's queue,
and nothing else waits behind them.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")

#: Pack calls that run at once, in all packs together.
PACK_THREADS = 8


@functools.cache
def pack_pool() -> ThreadPoolExecutor:
    """The process's pack pool, made by its first call (threads start as calls need them)."""
    return ThreadPoolExecutor(PACK_THREADS, thread_name_prefix="toolgraph-pack")


async def in_pack_thread(function: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """``function(*args, **kwargs)`` in a pack thread, with this task's context variables
    (as :func:`asyncio.to_thread` passes them)."""
    context = contextvars.copy_context()
    call = functools.partial(context.run, function, *args, **kwargs)
    return await asyncio.get_running_loop().run_in_executor(pack_pool(), call)
