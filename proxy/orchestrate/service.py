"""Orchestrate mode, without HTTP: plan, run the tools, answer.

One request goes through up to five stages, each timed into the trace and the
``toolgraph_stage_duration_seconds`` histogram: ``catalog`` (loaded once),
``gate`` (the learned "does any tool serve this?"; a request none serves skips
planning and tools and goes to the upstream as it came), ``plan`` (the planner;
it never raises, it degrades), ``execute`` (the tool DAG
in parallel, compressed outputs) and ``answer`` (the upstream model, streaming
when the client streams). A required value only the user can give ends the
request with the question as the assistant's answer, and no answer call.

A stream starts at once: while planning and tools run it carries SSE comments
every ``orchestrate.keepalive`` seconds and, with ``toolgraph.progress``, the
stages as ``delta.reasoning_content``. Headers go out first, so a failure later
is an error event; a non-streamed failure after tools ran carries
``x-should-retry: false`` so the SDK does not run them again.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

from pydantic import JsonValue

from proxy import json_codec, metrics
from proxy.config import Settings
from proxy.context import RequestContext
from proxy.errors import (
    InternalError,
    InvalidRequest,
    StoreFull,
    StoreUnavailable,
    ToolgraphError,
)
from proxy.execute.plan import ToolPlan
from proxy.execute.scheduler import CallRecord, Outcome
from proxy.execute.service import ExecutedPlan, ToolExecutor
from proxy.llm import MeteredModel, UpstreamModel, Usage
from proxy.orchestrate.answer import (
    KEEPALIVE,
    ChunkWriter,
    answer_body,
    answer_messages,
    completion,
    data_fields,
    with_usage,
)
from proxy.orchestrate.catalog import Catalog, CatalogService
from proxy.orchestrate.conversation import ConversationResults, EarlierCall
from proxy.orchestrate.idempotency import Claim, IdempotencyKeys, Stored
from proxy.orchestrate.records import LostRecords, Stores
from proxy.orchestrate.traces import TraceStore, call_traces
from proxy.plan.model import Plan
from proxy.protocol.base import dump_json
from proxy.protocol.chat import ChatCompletionRequest, ChoiceDelta, read_chunk, read_completion
from proxy.upstream import ModelRouter, Reply, Target, Upstream, Upstreams, within
from retriever.conversation import conversation_query, message_text

log = logging.getLogger(__name__)

TRACE_HEADER = "x-toolgraph-trace-id"
#: Messages of the conversation the planner reads, newest kept, and their characters.
PLAN_TURNS = 12
PLAN_CHARS = 6000

Say = Callable[[str], None]


@dataclass(slots=True)
class Turn:
    """One orchestrated request in flight, and what its trace collects."""

    request: ChatCompletionRequest
    body: dict[str, Any]
    context: RequestContext
    target: Target
    upstream: Upstream
    client: str  # a hash of the client's key: scopes replays and reused results
    trace_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    completion_id: str = field(default_factory=lambda: f"chatcmpl-tg{uuid.uuid4().hex[:24]}")
    created: int = field(default_factory=lambda: int(time.time()))
    usage: Usage = field(default_factory=Usage)
    tools_ran: bool = False
    trace_saved: bool = False
    trace: dict[str, JsonValue] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def messages(self) -> list[JsonValue]:
        messages: list[JsonValue] = self.body["messages"]
        return messages

    @property
    def headers(self) -> dict[str, str]:
        return {TRACE_HEADER: self.trace_id}

    def answered(self) -> bool:
        """Whether the client got a whole answer (or a question), not an error."""
        answer = self.trace.get("answer")
        return isinstance(answer, dict) and answer.get("kind") in ("answer", "question")

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Time a stage into the trace (summed when it runs twice) and the histogram."""
        started = time.perf_counter()
        try:
            yield
        finally:
            took = time.perf_counter() - started
            self.timings[name] = round(self.timings.get(name, 0.0) + took, 6)
            metrics.STAGE_LATENCY.labels(name).observe(took)


@dataclass(slots=True)
class Prepared:
    """Planning and tools done: either a question for the user or the answer's request."""

    earlier: list[EarlierCall]
    executed: ExecutedPlan | None
    question: str = ""
    body: dict[str, Any] = field(default_factory=dict)


class Orchestrator:
    def __init__(
        self,
        settings: Settings,
        catalog: CatalogService,
        executor: ToolExecutor,
        router: ModelRouter,
        upstreams: Upstreams,
        stores: Stores,
    ) -> None:
        options = settings.orchestrate
        self.catalog = catalog
        self.executor = executor
        self.traces = TraceStore(stores.traces, options.trace_ttl, settings.secrets())
        self.keys = IdempotencyKeys(stores.keys, options.idempotency_ttl)
        self.results = ConversationResults(
            stores.results, options.conversation_ttl, options.max_reused_results
        )
        self._lost = LostRecords()
        self._router = router
        self._upstreams = upstreams
        self._keepalive = options.keepalive
        self._query_turns = settings.retriever.query_turns
        self._request_timeout = settings.timeouts.request
        self._secrets = tuple(settings.secrets())
        self._pending: set[asyncio.Task[None]] = set()

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
        context.mode, context.model = "orchestrate", target.label
        return Turn(
            request,
            body,
            context,
            target,
            self._upstreams.for_target(target),
            client=_client_scope(context.client_key),
        )

    async def claim(self, turn: Turn, key: str, raw: bytes) -> Claim | Stored:
        return await self.keys.claim(key, turn.client, raw)

    # --- non-streamed -------------------------------------------------------------

    async def complete(self, turn: Turn, claim: Claim | None = None) -> Reply:
        settled = False  # the key holds its outcome (or was given up)
        try:
            try:
                async with within(self._remaining(turn)):
                    reply = await self._complete(turn)
            except ToolgraphError as exc:
                failure = exc
            except Exception:  # a bug: still an error the client can read, and no retry
                log.exception("orchestrated request %s failed", turn.trace_id)
                failure = InternalError("the request failed inside toolgraph; see its trace id")
            else:
                await self._save_trace(turn)  # readable once the client has the answer
                settled = True
                await self._settled(claim, turn, Stored(200, reply.headers, reply.content))
                return reply
            failure.headers.update(turn.headers)
            if turn.tools_ran:
                failure.headers["x-should-retry"] = "false"
            self._record_error(turn, failure)
            await self._save_trace(turn)
            settled = True
            stored = Stored(failure.status, dict(failure.headers), failure.to_json(self._secrets))
            await self._settled(claim, turn, stored if turn.tools_ran else None)
            raise failure
        finally:
            if not settled:  # cancelled: the client went away
                self._spawn(self._settle(claim, turn, None))
            if not turn.trace_saved:
                self._spawn(self._save_trace(turn))

    async def _complete(self, turn: Turn) -> Reply:
        prepared = await self._prepare(turn, _silent)
        if prepared.question:
            answer = completion(
                turn.completion_id,
                turn.created,
                turn.request.model,
                prepared.question,
                turn.usage.as_openai(),
            )
        else:
            with turn.stage("answer"):
                reply = await turn.upstream.complete(turn.target, prepared.body, None, turn.context)
            answer = read_completion(reply.content)
            turn.usage.add(answer.usage.model_dump() if answer.usage else None)
            answer = with_usage(answer, turn.usage.as_openai())
        turn.trace["answer"] = {"kind": "question" if prepared.question else "answer"}
        await self._after_answer(turn, prepared, answer.text())
        return Reply(dump_json(answer), turn.headers)

    # --- streamed -------------------------------------------------------------------

    async def stream(self, turn: Turn, claim: Claim | None = None) -> AsyncIterator[bytes]:
        """The client's events: keep-alives and progress, then the answer's chunks."""
        include_usage = bool(
            turn.request.stream_options and turn.request.stream_options.include_usage
        )
        writer = ChunkWriter(turn.completion_id, turn.created, turn.request.model, include_usage)
        sent: list[bytes] = []  # every event but keep-alives, for a replay
        ended = False  # the stream went out whole: an answer, a question or an error event
        first = True
        try:
            async for event in self._events(turn, writer):
                if first:
                    metrics.TIME_TO_FIRST_TOKEN.labels("orchestrate", turn.context.model).observe(
                        turn.context.elapsed()
                    )
                    first = False
                if event is not KEEPALIVE:
                    sent.append(event)
                yield event
            ended = True
        finally:
            # A replay gets what the first client got, when it got all of it; a stream
            # its client cut short leaves no answer to replay (``_settle`` decides).
            whole = ended and (turn.answered() or turn.tools_ran)
            self._spawn(
                self._settle(claim, turn, Stored(200, turn.headers, events=sent) if whole else None)
            )
            if not turn.trace_saved:  # cancelled: the client went away
                self._spawn(self._save_trace(turn))

    async def _events(self, turn: Turn, writer: ChunkWriter) -> AsyncIterator[bytes]:
        queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        progress = bool(turn.request.toolgraph and turn.request.toolgraph.progress)

        def say(text: str) -> None:
            if progress:
                queue.put_nowait(writer.progress(text + "\n"))

        work = asyncio.create_task(self._prepare(turn, say), name=f"orchestrate:{turn.trace_id}")
        work.add_done_callback(lambda _: queue.put_nowait(None))
        try:
            async with within(self._remaining(turn)):
                while (item := await self._next(queue)) is not None:
                    yield item
                prepared = work.result()
                if prepared.question:
                    turn.trace["answer"] = {"kind": "question"}
                    yield writer.delta(ChoiceDelta(content=prepared.question))
                    yield writer.delta(ChoiceDelta(), "stop")
                    await self._after_answer(turn, prepared, prepared.question)
                else:
                    text: list[str] = []
                    async for event in self._answer_events(turn, prepared, writer, text):
                        yield event
                    if "answer" in turn.trace:  # the upstream's error event ended it
                        return
                    turn.trace["answer"] = {"kind": "answer"}
                    await self._after_answer(turn, prepared, "".join(text))
                # Results and trace are kept before [DONE]: a follow-up or a trace
                # lookup sent the moment the client sees it must find them.
                await self._save_trace(turn)
                for event in writer.end(turn.usage.as_openai()):
                    yield event
        except ToolgraphError as exc:  # UpstreamTimeout at the request's deadline too
            yield await self._error_event(turn, exc)
        except Exception:  # a bug: the client still gets an ending it can read
            log.exception("orchestrated stream %s failed", turn.trace_id)
            failure = InternalError("the request failed inside toolgraph; see its trace id")
            yield await self._error_event(turn, failure)
        finally:
            if not work.done():
                work.cancel()
                with suppress(asyncio.CancelledError, Exception):
                    await work

    async def _error_event(self, turn: Turn, error: ToolgraphError) -> bytes:
        self._record_error(turn, error)
        await self._save_trace(turn)
        return error.to_sse(self._secrets)

    async def _next(self, queue: asyncio.Queue[bytes | None]) -> bytes | None:
        try:
            return await asyncio.wait_for(queue.get(), self._keepalive)
        except TimeoutError:
            return KEEPALIVE

    async def _answer_events(
        self, turn: Turn, prepared: Prepared, writer: ChunkWriter, text: list[str]
    ) -> AsyncIterator[bytes]:
        # The stage runs to the answer's last chunk, as the non-streamed one does.
        with turn.stage("answer"):
            async for event in self._relay_answer(turn, prepared, writer, text):
                yield event

    async def _relay_answer(
        self, turn: Turn, prepared: Prepared, writer: ChunkWriter, text: list[str]
    ) -> AsyncIterator[bytes]:
        stream = await turn.upstream.stream(turn.target, prepared.body, None, turn.context)
        try:
            async for events in stream:
                for data in data_fields(events):
                    if data == b"[DONE]":
                        continue
                    chunk = json_codec.loads(data)
                    if not isinstance(chunk, dict):
                        continue
                    if "error" in chunk:  # the upstream's own mid-stream error: pass it on
                        turn.trace["answer"] = {"kind": "error", "error": chunk["error"]}
                        yield b"data: " + data + b"\n\n"
                        return
                    turn.usage.add(chunk.get("usage"))
                    if not chunk.get("choices"):
                        continue
                    typed = read_chunk(chunk)
                    text.append(typed.text())
                    yield writer.upstream_chunk(typed)
        finally:
            await stream.aclose()

    # --- planning and tools ---------------------------------------------------------

    async def _prepare(self, turn: Turn, say: Say) -> Prepared:
        say("planning…")
        with turn.stage("catalog"):
            catalog = await self.catalog.get()
        earlier = await self._earlier(turn)
        if not await self._gate(turn, catalog):
            say("answering…")  # no tool serves the request: no planning, no tools
            messages = answer_messages(turn.messages, None, earlier)
            return Prepared(earlier, None, body=answer_body(turn.body, turn.target.model, messages))
        model = MeteredModel(UpstreamModel(turn.upstream, turn.target, turn.context), turn.usage)
        with turn.stage("plan"):
            plan = await catalog.planner.plan(conversation_text(turn.messages), model, turn.client)
            tool_plan = await asyncio.to_thread(plan.tool_plan, catalog.store)
        self._count_tools(plan, tool_plan)
        turn.trace["plan"] = plan.trace()
        turn.trace["tool_plan"] = [node.model_dump(mode="json") for node in tool_plan.nodes]
        executed = None
        if tool_plan.nodes:
            say("calling " + ", ".join(dict.fromkeys(node.tool for node in tool_plan.nodes)) + "…")
            executed = await self._execute(turn, catalog, tool_plan, model, earlier, say)
            if questions := executed.run.questions():
                return Prepared(earlier, executed, question="\n".join(questions))
            # off the request's path: embedding the sub-tasks and writing Qdrant
            self._spawn(self._remember_path(catalog, plan, executed, turn.client))
        say("answering…")
        messages = answer_messages(turn.messages, executed, earlier)
        return Prepared(earlier, executed, body=answer_body(turn.body, turn.target.model, messages))

    async def _gate(self, turn: Turn, catalog: Catalog) -> bool:
        """Whether a catalog tool may serve the request (always, with the gate off)."""
        if catalog.gate is None:
            return True
        with turn.stage("gate"):
            query = conversation_query(_dicts(turn.messages), self._query_turns)
            decision = await asyncio.to_thread(catalog.gate.decide, query)
        turn.trace["gate"] = {"decision": decision.label, "score": decision.score}
        return decision.needs_tool

    async def _execute(
        self,
        turn: Turn,
        catalog: Catalog,
        tool_plan: ToolPlan,
        model: MeteredModel,
        earlier: list[EarlierCall],
        say: Say,
    ) -> ExecutedPlan:
        def observe(record: CallRecord) -> None:
            if record.outcome is None:
                turn.tools_ran = True
            elif record.outcome is not Outcome.OK:
                say(f"{record.node.tool}: {record.outcome}")

        with turn.stage("execute"):
            executed = await self.executor.execute(
                tool_plan,
                catalog.tools,
                model,
                observe,
                reuse={call.key(): call.output for call in earlier},
                background={
                    f"earlier-{i}": f"{call.tool}: {call.text}" for i, call in enumerate(earlier, 1)
                },
                client=turn.client,
            )
        turn.trace["calls"] = call_traces(executed)
        turn.trace["deadline_exceeded"] = executed.run.deadline_exceeded
        return executed

    async def _remember_path(
        self, catalog: Catalog, plan: Plan, executed: ExecutedPlan, scope: str
    ) -> None:
        from proxy.plan.policy import embed_subtasks  # with the catalog: loaded by now

        memory = catalog.memory
        if memory is None or not executed.run.ok or not plan.subtasks:
            return
        try:
            vectors = await asyncio.to_thread(
                embed_subtasks, catalog.planner.encoder, plan.subtasks
            )
            await memory.remember(plan, executed.run, vectors, scope)
        except Exception:  # memory is a help to later plans, never a failure of this one
            log.warning("could not remember the plan's path", exc_info=True)

    def _count_tools(self, plan: Plan, tool_plan: ToolPlan) -> None:
        offered = {c.tool for d in plan.decisions for c in d.candidates}
        metrics.TOOLS_SELECTED.labels("orchestrate", "offered").inc(len(offered))
        metrics.TOOLS_SELECTED.labels("orchestrate", "injected").inc(len(tool_plan.nodes))

    async def _after_answer(self, turn: Turn, prepared: Prepared, answer: str) -> None:
        """Keep this turn's results for follow-ups."""
        calls = list(prepared.earlier)
        executed = prepared.executed
        if executed is not None:
            for node_id, record in executed.run.records.items():
                compressed = executed.compressed.get(node_id)
                if record.outcome is Outcome.OK and compressed is not None:
                    calls.append(
                        EarlierCall(
                            record.node.tool, record.arguments, record.output, compressed.text
                        )
                    )
        remember = self.results.remember(_dicts(turn.messages), answer, turn.client, calls)
        await self._lost.keep("a turn's tool results", remember)

    # --- bookkeeping ----------------------------------------------------------------

    async def _earlier(self, turn: Turn) -> list[EarlierCall]:
        """The earlier turn's results; none when their store is down (tools run again)."""
        try:
            return await self.results.earlier(_dicts(turn.messages), turn.client)
        except StoreUnavailable as exc:
            self._lost.lose("an earlier turn's tool results (not read)", exc)
            return []

    async def _settled(self, claim: Claim | None, turn: Turn, outcome: Stored | None) -> None:
        """``_settle`` before the client gets the answer (a replay sent at once finds it),
        and to its end even if the client goes away meanwhile."""
        await asyncio.shield(self._spawn(self._settle(claim, turn, outcome)))

    async def _settle(self, claim: Claim | None, turn: Turn, outcome: Stored | None) -> None:
        """What the request's Idempotency-Key keeps: ``outcome``; without one, nothing
        if no tool started (a retry may run), else the abandoned request's error."""
        if claim is None:
            return
        if outcome is not None:
            work = self.keys.finish(claim, outcome)
        elif turn.tools_ran:
            work = self.keys.abandon(claim, turn.headers)
        else:
            work = self.keys.release(claim)
        await self._lost.keep("an Idempotency-Key's outcome", work)

    def _record_error(self, turn: Turn, error: ToolgraphError) -> None:
        turn.trace["answer"] = {"kind": "error", "error": error.to_dict(self._secrets)["error"]}

    async def _save_trace(self, turn: Turn) -> None:
        turn.trace_saved = True
        turn.timings["total"] = round(turn.context.elapsed(), 6)
        trace: dict[str, JsonValue] = {
            "id": turn.trace_id,
            "request_id": turn.context.request_id,
            "created": turn.created,
            "model": turn.request.model,
            "upstream_model": turn.target.model,
            "stream": bool(turn.request.stream),
            "conversation": conversation_text(turn.messages),
            "answer": {"kind": "cancelled"},
            "calls": [],
            **turn.trace,
            "timings": dict(turn.timings),
            "usage": {kind: count for kind, count in turn.usage.as_openai().items()},
            "upstream_calls": turn.usage.calls,
        }
        try:
            await self.traces.put(turn.trace_id, trace)
        except (StoreUnavailable, StoreFull) as exc:  # down, or a trace over its bound
            self._lost.lose("a trace", exc)
        except Exception:  # a bug; still, a lost trace must not fail the request
            log.exception("could not store trace %s", turn.trace_id)

    def _spawn(self, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """Run bookkeeping to its end even when the request was cancelled."""
        task = asyncio.get_running_loop().create_task(work)
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)
        return task

    async def drain(self) -> None:
        """Wait for the bookkeeping still running (at shutdown)."""
        if self._pending:
            await asyncio.gather(*self._pending, return_exceptions=True)

    def _remaining(self, turn: Turn) -> float:
        return max(0.0, self._request_timeout - turn.context.elapsed())


def conversation_text(messages: list[JsonValue]) -> str:
    """The conversation as the planner reads it: recent turns, ``role: text`` lines."""
    turns = [
        (str(message.get("role")), text)
        for message in _dicts(messages)[-PLAN_TURNS:]
        if message.get("role") in ("user", "assistant") and (text := message_text(message))
    ]
    if len(turns) == 1:  # a single request needs no speaker
        return turns[0][1][-PLAN_CHARS:]
    return "\n".join(f"{role}: {text}" for role, text in turns)[-PLAN_CHARS:]


def _dicts(messages: list[JsonValue]) -> list[Mapping[str, JsonValue]]:
    return [m for m in messages if isinstance(m, dict)]


def _client_scope(key: str | None) -> str:
    return hashlib.sha256((key or "").encode()).hexdigest()[:32]


def _silent(text: str) -> None:
    pass
