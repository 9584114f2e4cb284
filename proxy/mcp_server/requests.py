"""``/mcp``'s ``plan`` and ``run``: a request in words, planned over the whole catalog.

``plan`` asks orchestrate mode's planner for the request's plan (its sub-tasks, the
tool chosen for each with the candidates and the reason, and the tool DAG the
executor would run) and runs nothing; the gate is not asked, since the client asked
for a plan. ``run`` is one orchestrated chat completion, exactly as ``/v1`` would run
it (a trace kept, an ``idempotency_key`` honoured as the header is, destructive
tools only under one), and returns the answer with its trace id.

The model is the one the client names, else the settings' first routed model, else
``upstream_model``.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import JsonValue, ValidationError

from proxy.config import Settings
from proxy.context import RequestContext
from proxy.errors import InvalidRequest, ToolgraphError
from proxy.modes import ChatCall
from proxy.orchestrate.service import Orchestrator
from proxy.orchestrate.turn import TRACE_HEADER
from proxy.protocol.chat import ChatCompletionRequest


class RequestTools:
    def __init__(self, orchestrator: Orchestrator, settings: Settings) -> None:
        self._orchestrator = orchestrator
        routed = [route.name for route in settings.models]
        self._model = routed[0] if routed else settings.upstream_model

    async def plan(
        self, text: str, model: str | None = None, caller: RequestContext | None = None
    ) -> dict[str, JsonValue]:
        """The plan for ``text``, nothing run."""
        call = self._call(text, model, None, caller)
        turn = self._orchestrator.start(call.request, call.body, call.context)
        plan, tool_plan = await self._orchestrator.pipeline.plan_only(turn)
        return {
            **plan.trace(),
            "calls": [node.model_dump(mode="json", exclude_none=True) for node in tool_plan.nodes],
        }

    async def run(
        self,
        text: str,
        model: str | None = None,
        idempotency_key: str | None = None,
        caller: RequestContext | None = None,
    ) -> dict[str, JsonValue]:
        """``text`` orchestrated: the answer and the trace id it can be read back by (by
        ``caller``'s tenant alone, as on ``/v1``)."""
        try:
            reply = await self._orchestrator.complete(
                self._call(text, model, idempotency_key, caller)
            )
        except ToolgraphError as exc:  # the client reads the trace to see what ran
            if trace := exc.headers.get(TRACE_HEADER):
                exc.message = f"{exc.message} (trace {trace})"
            raise
        body: dict[str, Any] = json.loads(reply.content)
        trace_id = reply.headers.get(TRACE_HEADER, "")
        if reply.status >= 400:  # a stored failure, replayed for its idempotency key
            message = body.get("error", {}).get("message", "the request failed")
            raise ToolgraphError(f"{message} (trace {trace_id})")
        answer = body["choices"][0]["message"].get("content") or ""
        return {"answer": answer, "trace_id": trace_id}

    def _call(
        self, text: str, model: str | None, key: str | None, caller: RequestContext | None
    ) -> ChatCall:
        name = model or self._model
        if not name:
            raise InvalidRequest(
                "name the model: no model is routed in the settings", param="model"
            )
        body: dict[str, Any] = {"model": name, "messages": [{"role": "user", "content": text}]}
        try:
            request = ChatCompletionRequest.model_validate(body)
        except ValidationError as exc:
            raise InvalidRequest(str(exc.errors()[0]["msg"]), param="request") from None
        context = RequestContext.start(None)
        context.mode = "orchestrate"
        if caller is not None:  # who the HTTP request was (McpEndpoint authenticated it)
            context.client_key, context.tenant = caller.client_key, caller.tenant
            context.fairness, context.tool_scope = caller.fairness, caller.tool_scope
        raw = json.dumps(body).encode()
        return ChatCall(request, body, raw, context, idempotency_key=key)
