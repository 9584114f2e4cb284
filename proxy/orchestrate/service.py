"""Orchestrate mode, without HTTP: the mode's service (:class:`~proxy.modes.ChatMode`).

:meth:`Orchestrator.start` checks the request and routes its model into a
:class:`~proxy.orchestrate.turn.Turn`; its ``Idempotency-Key`` is claimed, or the
answer stored under it replayed (``replay.py``); the
:class:`~proxy.orchestrate.pipeline.Pipeline` (gate → plan → execute → answer) takes
it to a typed outcome; :meth:`complete` makes that a JSON body or raises its error,
:meth:`stream` (``stream.py``) makes it events. Either ends the turn in one scope
(``ending.py``): the key's outcome and the trace. A non-streamed failure after tools
ran carries ``x-should-retry: false`` so the SDK does not run them again.
"""

from __future__ import annotations

from typing import Any

from proxy.catalog.service import CatalogService
from proxy.config import Settings
from proxy.context import RequestContext
from proxy.errors import InvalidRequest, ToolgraphError
from proxy.execute.service import ToolExecutor
from proxy.learning.service import Learner
from proxy.modes import Answer, ChatCall, Events
from proxy.orchestrate.answer import completion, with_usage
from proxy.orchestrate.ending import TurnEnd, claim_key
from proxy.orchestrate.idempotency import Claim, Stored
from proxy.orchestrate.joiner import WholeAnswer
from proxy.orchestrate.pipeline import Pipeline
from proxy.orchestrate.records import Stores, TurnRecords
from proxy.orchestrate.replay import replay, replay_reply
from proxy.orchestrate.stream import TurnStream
from proxy.orchestrate.turn import AskedUser, Failed, Outcome, Turn
from proxy.protocol.base import dump_json
from proxy.protocol.chat import ChatCompletion, ChatCompletionRequest
from proxy.tenancy.callers import end_user_slot
from proxy.upstream import ModelRouter, Reply, Upstreams


class Orchestrator:
    def __init__(
        self,
        settings: Settings,
        catalog: CatalogService,
        executor: ToolExecutor,
        router: ModelRouter,
        upstreams: Upstreams,
        stores: Stores,
        learner: Learner | None = None,
    ) -> None:
        self.catalog = catalog
        self.records = TurnRecords(settings, stores, learner)
        self.traces = self.records.traces
        self.pipeline = Pipeline(
            catalog,
            executor,
            self.records,
            query_turns=settings.retriever.query_turns,
            request_timeout=settings.timeouts.request,
            max_model_calls=settings.orchestrate.max_model_calls,
        )
        self._streams = TurnStream(
            self.pipeline, self.records, settings.orchestrate.keepalive, settings.secrets()
        )
        self._router = router
        self._upstreams = upstreams
        self._secrets = tuple(settings.secrets())

    def start(
        self, request: ChatCompletionRequest, body: dict[str, Any], context: RequestContext
    ) -> Turn:
        """Check that the request can be orchestrated and route its model."""
        if request.tools:
            raise InvalidRequest(
                "orchestrate mode runs the catalog's tools: send the request without 'tools', "
                "or use select mode to trim your own",
                param="tools",
                code="tools_not_allowed",
            )
        if request.n not in (None, 1):
            raise InvalidRequest(
                "orchestrate mode answers with one choice: 'n' must be 1", param="n"
            )
        target = self._router.resolve(request.model)
        context.model = target.label
        return Turn(
            request,
            body,
            context,
            target,
            self._upstreams.for_target(target),
            client=context.tenant,
            fairness=end_user_slot(context.fairness, body.get("user")),
        )

    async def complete(self, call: ChatCall) -> Reply:
        """The answer as one ``chat.completion`` body, or the outcome's error raised."""
        turn = self.start(call.request, call.body, call.context)
        claim = await self._claim(turn, call)
        if isinstance(claim, Stored):
            return replay_reply(claim)
        return await self.answer(turn, claim)

    async def stream(self, call: ChatCall) -> Answer:
        """The client's events: keep-alives and progress, then the answer's chunks."""
        turn = self.start(call.request, call.body, call.context)
        claim = await self._claim(turn, call)
        if isinstance(claim, Stored):
            return replay(claim)
        return Events(self._streams.stream(turn, claim), turn.headers)

    async def _claim(self, turn: Turn, call: ChatCall) -> Claim | Stored | None:
        """The request's key claimed, or its stored answer; ``None`` without a key."""
        if call.idempotency_key is None:
            return None
        return await claim_key(
            self.records.keys, self.records, turn, call.idempotency_key, call.raw
        )

    async def answer(self, turn: Turn, claim: Claim | None = None) -> Reply:
        """``turn`` (started, its key claimed) answered whole, or its error raised."""
        async with TurnEnd(self.records, turn, claim) as end:
            joiner = WholeAnswer()
            outcome = await self.pipeline.run(turn, joiner)
            await end.save_trace()  # readable once the client has the answer
            if isinstance(outcome, Failed):
                raise await self._failure(turn, end, outcome.error)
            reply = Reply(dump_json(self._completion(turn, outcome, joiner)), turn.headers)
            await end.settle(Stored(200, reply.headers, reply.content))
            return reply

    def _completion(self, turn: Turn, outcome: Outcome, joiner: WholeAnswer) -> ChatCompletion:
        usage = turn.usage.as_openai()
        if isinstance(outcome, AskedUser):
            model = turn.request.model
            return completion(turn.completion_id, turn.created, model, outcome.question, usage)
        return with_usage(joiner.completion, usage)

    async def _failure(self, turn: Turn, end: TurnEnd, error: ToolgraphError) -> ToolgraphError:
        """``error`` as the client gets it; after tools ran, also what its key keeps (a
        retry must not run them again), else the key is given up."""
        error.headers.update(turn.headers)
        if turn.tools_ran:
            error.headers["x-should-retry"] = "false"
        stored = Stored(error.status, dict(error.headers), error.to_json(self._secrets))
        await end.settle(stored if turn.tools_ran else None)
        return error

    async def drain(self) -> None:
        """Wait for the bookkeeping still running (at shutdown)."""
        await self.records.drain()
