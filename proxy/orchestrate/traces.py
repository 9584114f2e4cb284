"""Request traces: everything one orchestrated request did, kept for a while.

``GET /v1/toolgraph/traces/{id}`` returns one (the id is the response's
``x-toolgraph-trace-id``), ``GET /v1/toolgraph/traces`` a summary of the latest
(:func:`trace_summary`; the console's list): the plan with every candidate list and decision, the
tool DAG, every call with its arguments, timings, raw and compressed output, the
answer's kind, the summed usage and each upstream call's tokens (``upstream_usage``:
what the call was for — decompose, pick, arguments, fields, answer… — and its counts).
It is derived from the typed :class:`Turn` when it is saved; nothing reads it to
decide what to do. Secrets the proxy knows (upstream keys, tool credentials) are
masked in the whole record before it is stored. A trace is kept under its request's
tenant (:mod:`proxy.tenancy`) and read and listed under it alone: another tenant's
id reads as unknown. Its summary is kept beside it, so that a list reads summaries
of a few hundred bytes, never the traces (up to ``TRACE_BYTES`` each) they sum up.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pydantic import JsonValue

from proxy import json_codec
from proxy.errors import redact
from proxy.execute.scheduler import CallRecord, PlanRun
from proxy.execute.service import ExecutedPlan
from proxy.kv import KeyValue
from proxy.llm import UpstreamCall
from proxy.orchestrate.turn import AskedUser, Failed, Turn, conversation_text

#: The characters of a conversation a trace summary keeps (its end: the latest turn).
SUMMARY_CHARS = 240


class TraceStore:
    def __init__(self, store: KeyValue, ttl: int, secrets: Sequence[str]) -> None:
        self._store = store
        self._ttl = ttl
        self._secrets = tuple(secrets)

    async def put(self, tenant: str, trace_id: str, trace: dict[str, JsonValue]) -> None:
        """Keep ``trace`` and its summary, counted against ``tenant``'s share."""
        for key, record in (
            (_key(tenant, trace_id), trace),
            (_summary_key(tenant, trace_id), trace_summary(trace)),
        ):
            text = json_codec.dumps(record, default=str).decode()
            await self._store.put(
                key, redact(text, self._secrets).encode(), self._ttl, tenant=tenant
            )

    async def get(self, tenant: str, trace_id: str) -> bytes | None:
        return await self._store.get(_key(tenant, trace_id))

    async def summaries(self, tenant: str, limit: int) -> list[dict[str, JsonValue]]:
        """The summaries of up to ``limit`` of ``tenant``'s kept traces, the latest first."""
        found = []
        for _, raw in await self._store.newest(limit, _summary_key(tenant, "")):
            summary = json_codec.loads(raw)
            if isinstance(summary, dict):
                found.append(summary)
        return found


def _key(tenant: str, trace_id: str) -> str:
    return f"trace:{tenant}:{trace_id}"


def _summary_key(tenant: str, trace_id: str) -> str:
    return f"trace-summary:{tenant}:{trace_id}"


@dataclass(frozen=True, slots=True)
class TraceFilter:
    """Which summaries a list keeps: all of its set conditions hold."""

    outcome: str | None = None  # the answer's kind: answer, question, error, cancelled
    tool: str | None = None  # a call ran this tool
    min_seconds: float | None = None  # the request took at least this long

    def keeps(self, summary: Mapping[str, JsonValue]) -> bool:
        tools = summary["tools"]
        seconds = summary["seconds"]
        return (
            (self.outcome is None or summary["outcome"] == self.outcome)
            and (self.tool is None or (isinstance(tools, list) and self.tool in tools))
            and (
                self.min_seconds is None
                or (isinstance(seconds, int | float) and seconds >= self.min_seconds)
            )
        )


def trace_summary(trace: Mapping[str, JsonValue]) -> dict[str, JsonValue]:
    """One line of the trace list: who asked what, which tools ran (and each call's
    outcome: a tool's page lists its recent calls), how it ended, how long."""
    calls = [c for c in _list(trace.get("calls")) if isinstance(c, dict)]
    answer, timings = trace.get("answer"), trace.get("timings")
    return {
        "id": trace.get("id"),
        "created": trace.get("created"),
        "model": trace.get("model"),
        "conversation": str(trace.get("conversation") or "")[-SUMMARY_CHARS:],
        "outcome": answer.get("kind") if isinstance(answer, dict) else None,
        "tools": [c.get("tool") for c in calls],
        "calls": [{k: c.get(k) for k in ("node", "tool", "outcome")} for c in calls],
        "failed_calls": sum(1 for c in calls if c.get("outcome") not in ("ok", None)),
        "seconds": timings.get("total") if isinstance(timings, dict) else None,
        "stream": trace.get("stream"),
    }


def _list(value: JsonValue | None) -> list[JsonValue]:
    return value if isinstance(value, list) else []


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
        "calls": call_traces(turn.executed) if turn.executed else _running_calls(turn),
    }
    if turn.gate is not None:
        trace["gate"] = {
            "decision": turn.gate.label,
            "score": turn.gate.score,
            "threshold": turn.gate.threshold,
        }
    if turn.plan is not None:
        trace["plan"] = turn.plan.trace()
    if turn.tool_plan is not None:
        trace["tool_plan"] = [node.model_dump(mode="json") for node in turn.tool_plan.nodes]
    if turn.executed is not None:
        trace["deadline_exceeded"] = turn.executed.run.deadline_exceeded
    trace["timings"] = dict(turn.timings)
    trace["usage"] = dict(turn.usage.as_openai())
    trace["upstream_calls"] = turn.usage.calls
    trace["upstream_usage"] = [_upstream_call(call) for call in turn.usage.log]
    return trace


def _upstream_call(call: UpstreamCall) -> JsonValue:
    """One upstream reply: the stage that asked, about what, its tokens and seconds."""
    return {
        "purpose": call.purpose,
        "about": call.about,
        "prompt_tokens": call.prompt_tokens,
        "completion_tokens": call.completion_tokens,
        "seconds": round(call.seconds, 3),
    }


def _answer(turn: Turn, secrets: Sequence[str]) -> JsonValue:
    outcome = turn.outcome
    if outcome is None:  # the client went away first
        return {"kind": "cancelled"}
    if isinstance(outcome, Failed):
        return {"kind": "error", "error": outcome.error.to_dict(secrets)["error"]}
    return {"kind": "question" if isinstance(outcome, AskedUser) else "answer"}


def call_traces(executed: ExecutedPlan) -> list[JsonValue]:
    return [_call(record, executed) for record in executed.run.records.values()]


def _running_calls(turn: Turn) -> list[JsonValue]:
    """The calls of a plan that never finished (its request was cancelled): each one the
    scheduler had started or ended by then, with its outcome (``cancelled`` if it ran)."""
    return call_traces(ExecutedPlan(PlanRun(dict(turn.running)))) if turn.running else []


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
        "host": record.host or None,
        "mcp_server": _mcp_server(record.host),
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


def _mcp_server(host: str) -> str | None:
    """The MCP server a call went to (its host is ``mcp:<server>``), else None."""
    return host.removeprefix("mcp:") if host.startswith("mcp:") else None


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 3)
