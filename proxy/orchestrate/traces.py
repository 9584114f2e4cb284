"""Request traces: everything one orchestrated request did, kept for a while.

``GET /v1/toolgraph/traces/{id}`` returns one (the id is the response's
``x-toolgraph-trace-id``): the plan with every candidate list and decision, the
tool DAG, every call with its arguments, timings, raw and compressed output, the
answer's kind and the summed usage. Secrets the proxy knows (upstream keys, tool
credentials) are masked in the whole record before it is stored.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import JsonValue

from proxy import json_codec
from proxy.errors import redact
from proxy.execute.scheduler import CallRecord
from proxy.execute.service import ExecutedPlan
from proxy.kv import KeyValue


class TraceStore:
    def __init__(self, store: KeyValue, ttl: int, secrets: Sequence[str]) -> None:
        self._store = store
        self._ttl = ttl
        self._secrets = tuple(secrets)

    async def put(self, trace_id: str, trace: dict[str, JsonValue]) -> None:
        text = json_codec.dumps(trace, default=str).decode()
        await self._store.put(f"trace:{trace_id}", redact(text, self._secrets).encode(), self._ttl)

    async def get(self, trace_id: str) -> bytes | None:
        return await self._store.get(f"trace:{trace_id}")


def call_traces(executed: ExecutedPlan) -> list[JsonValue]:
    return [_call(record, executed) for record in executed.run.records.values()]


def _call(record: CallRecord, executed: ExecutedPlan) -> JsonValue:
    node = record.node
    compressed = executed.compressed.get(node.id)
    return {
        "node": node.id,
        "tool": node.tool,
        "task": node.task,
        "needs": list(node.dependencies),
        "outcome": str(record.outcome) if record.outcome else None,
        "error": record.error,
        "question": record.question,
        "arguments": record.arguments,
        "attempts": executed.attempts.get(node.id, 0),
        "reused": node.id in executed.reused,
        "ready": _ms(record.ready),
        "started": _ms(record.started),
        "finished": _ms(record.finished),
        "output": record.output,
        "compressed": compressed.text if compressed else None,
        "compression": {
            "method": compressed.method,
            "raw_chars": compressed.raw_chars,
            "chars": len(compressed.text),
        }
        if compressed
        else None,
    }


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 3)
