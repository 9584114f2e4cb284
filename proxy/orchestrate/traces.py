"""Request traces: everything one orchestrated request did, kept for a while.

``GET /v1/toolgraph/traces/{id}`` returns one (the id is the response's
``x-toolgraph-trace-id``): the plan with every candidate list and decision, the
tool DAG, every call with its arguments, timings, raw and compressed output, the
answer's kind and the summed usage. It is derived from the typed :class:`Turn`
when it is saved; nothing reads it to decide what to do. Secrets the proxy knows
(upstream keys, tool credentials) are masked in the whole record before it is
stored.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import JsonValue

from proxy import json_codec
from proxy.errors import redact
from proxy.execute.scheduler import CallRecord
from proxy.execute.service import ExecutedPlan
from proxy.kv import KeyValue
from proxy.orchestrate.turn import AskedUser, Failed, Turn, conversation_text


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


def turn_trace(turn: Turn, secrets: Sequence[str]) -> dict[str, JsonValue]:
    """The trace of ``turn`` as it stands (still running: what it did so far)."""
    trace: dict[str, JsonValue] = {
        "id": turn.trace_id,
        "request_id": turn.context.request_id,
        "created": turn.created,
        "model": turn.request.model,
        "upstream_model": turn.target.model,
        "stream": bool(turn.request.stream),
        "conversation": conversation_text(turn.messages),
        "answer": _answer(turn, secrets),
        "calls": call_traces(turn.executed) if turn.executed else [],
    }
    if turn.gate is not None:
        trace["gate"] = {"decision": turn.gate.label, "score": turn.gate.score}
    if turn.plan is not None:
        trace["plan"] = turn.plan.trace()
    if turn.tool_plan is not None:
        trace["tool_plan"] = [node.model_dump(mode="json") for node in turn.tool_plan.nodes]
    if turn.executed is not None:
        trace["deadline_exceeded"] = turn.executed.run.deadline_exceeded
    trace["timings"] = dict(turn.timings)
    trace["usage"] = dict(turn.usage.as_openai())
    trace["upstream_calls"] = turn.usage.calls
    return trace


def _answer(turn: Turn, secrets: Sequence[str]) -> JsonValue:
    outcome = turn.outcome
    if outcome is None:  # the client went away first
        return {"kind": "cancelled"}
    if isinstance(outcome, Failed):
        return {"kind": "error", "error": outcome.error.to_dict(secrets)["error"]}
    return {"kind": "question" if isinstance(outcome, AskedUser) else "answer"}


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
        "rejected": executed.rejected.get(node.id),  # a first call's input error, fed back
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
