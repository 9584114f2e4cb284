"""Run a :class:`ToolPlan`: each call starts the moment all of its inputs exist.

A ready-queue over the DAG, driven by completions rather than levels: when a call
finishes, each dependent's count of missing inputs drops, and a dependent whose
count reaches zero starts at once (a task in the request's ``TaskGroup``, so no
exception is lost and cancelling the request cancels every running call). A call
that fails marks everything downstream of it skipped, and nothing else; the
request's deadline cancels what still runs and skips what has not started.

Concurrency is bounded three times, each limit taken before the next so that a
call waiting for one holds none of the others: by one limit per client and host
(``max_per_client``), by one limit per host (``max_per_host``) and by one limit
for the process; the :class:`Scheduler` that holds them lives as long as the app.
The per-client limit keeps one client's expensive calls from delaying another's
cheap ones. Measured with the built-in tools (``python -m eval.sandbox_fairness``,
default limits: 4 slots for ``local``, 10 s sandbox timeout, a two-core machine):
one client's 8 calls of ``factorial(10**8)`` and 4 integrals of
``(a+b+c+d+x)**300`` (each runs until its timeout or memory cap) held all four
slots, and another client's ``2*pi*50`` waited 30.3 s for them; with 2 slots per
client it is answered in 0.16 s, while the first client's 12 calls take 60 s
instead of 30 s. A lower CPU budget per call was the other way: it only shortens
each call, so the wait still grows with the first client's number of calls (and
it cuts legitimate long computations); the sandbox keeps its wall-clock timeout
with ``RLIMIT_CPU`` one second above it as the backstop.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol, runtime_checkable

from pydantic import JsonValue

from proxy import metrics
from proxy.config import ExecutorSettings
from proxy.errors import (
    EgressDenied,
    MissingArguments,
    ToolError,
    ToolgraphError,
    ToolHttpStatus,
    ToolInputRejected,
    ToolUnavailable,
)
from proxy.execute.plan import PlanNode, ToolPlan

log = logging.getLogger(__name__)

#: The loop time at which the running call's window closes (None outside a call), so
#: work a runner does after the tool answered (compression) can fit itself inside it.
CALL_DEADLINE: ContextVar[float | None] = ContextVar("toolgraph_call_deadline", default=None)


class Outcome(StrEnum):
    OK = "ok"
    FAILED = "failed"
    TIMEOUT = "timeout"
    NEEDS_INPUT = "needs_input"  # a required value only the user can give
    SKIPPED = "skipped"  # a dependency failed, or the deadline came before it could start
    CANCELLED = "cancelled"  # the request went away while it ran


@dataclass(slots=True)
class CallRecord:
    """One node's call as it happened; times are seconds since the plan started."""

    node: PlanNode
    outcome: Outcome | None = None
    output: JsonValue = None
    error: str = ""
    question: str = ""
    #: the call could not be fed: a required value is missing, the tool refused the input
    #: the argument writer gave it (rewritten included), or it cannot be called at all
    #: (:func:`unavailable`): another tool may serve
    infeasible: bool = False
    arguments: dict[str, JsonValue] = field(default_factory=dict)
    host: str = ""  # where it went (the per-host limit's key): a hostname, local, mcp:<server>
    ready: float | None = None
    started: float | None = None
    finished: float | None = None

    @property
    def done(self) -> bool:
        return self.outcome is not None

    def describe(self) -> str:
        """A line for the answer: what this call did, or why it did not."""
        name = f"{self.node.id} ({self.node.tool})"
        if self.outcome is Outcome.OK:
            return f"{name}: done"
        return f"{name}: {self.outcome or 'not run'}: {self.error}"


class NodeRunner(Protocol):
    """Turns one plan node into one tool call; the executor's per-request half."""

    def host(self, node: PlanNode) -> str:
        """The host the call goes to, for the per-host limit (``local`` for in-process)."""
        ...

    async def run(
        self, node: PlanNode, arguments: dict[str, JsonValue], context: Mapping[str, JsonValue]
    ) -> JsonValue:
        """Call the tool; ``context`` holds the outputs of every node it depends on,
        directly or through others (:meth:`ToolPlan.lineage`).

        The runner may complete ``arguments`` in place (argument generation), so
        that the record keeps what was sent.
        """
        ...


@runtime_checkable
class PreparingRunner(NodeRunner, Protocol):
    """A runner that completes a node's arguments before its call (an LLM writing them):
    that step runs before the call's ``call_timeout`` window opens, so a slow model does
    not time out a tool it has not called yet (in the end-to-end traces a 1.5B model's
    argument writer took longer than the 30 s window on a busy machine). The request's
    deadline still bounds it."""

    async def prepare(
        self, node: PlanNode, arguments: dict[str, JsonValue], context: Mapping[str, JsonValue]
    ) -> None:
        """Complete ``arguments`` in place, or raise why the call cannot be made."""
        ...


@runtime_checkable
class RevisingRunner(PreparingRunner, Protocol):
    """A preparing runner that can write the arguments again after the tool rejected
    them (:class:`~proxy.errors.ToolInputRejected`): the call is made once more, in a
    window of its own, when :meth:`revise` says it rewrote them."""

    async def revise(
        self,
        node: PlanNode,
        arguments: dict[str, JsonValue],
        context: Mapping[str, JsonValue],
        error: str,
    ) -> bool:
        """Rewrite ``arguments`` in place after ``error``; False leaves the call failed."""
        ...


Observer = Callable[[CallRecord], None]


@dataclass(slots=True)
class PlanRun:
    """Every node's record, in plan order, and how the run as a whole went."""

    records: dict[str, CallRecord]
    wall: float = 0.0
    deadline_exceeded: bool = False

    @property
    def ok(self) -> bool:
        return all(record.outcome is Outcome.OK for record in self.records.values())

    def outputs(self) -> dict[str, JsonValue]:
        return {i: r.output for i, r in self.records.items() if r.outcome is Outcome.OK}

    def questions(self) -> list[str]:
        """What the user must answer before the calls that need it can run."""
        return [r.question for r in self.records.values() if r.outcome is Outcome.NEEDS_INPUT]

    def infeasible(self) -> set[str]:
        """The tools whose calls could not be fed (:attr:`CallRecord.infeasible`)."""
        return set(self.infeasible_nodes().values())

    def infeasible_nodes(self) -> dict[str, str]:
        """Node id → tool, for the calls that could not be fed."""
        return {r.node.id: r.node.tool for r in self.records.values() if r.infeasible}

    def unfinished(self) -> list[str]:
        """What could not be done, one line per call, for the answer and the trace."""
        return [r.describe() for r in self.records.values() if r.outcome is not Outcome.OK]


class Scheduler:
    """Runs plans under process-wide limits; one per app."""

    def __init__(self, limits: ExecutorSettings) -> None:
        self._limits = limits
        self._global = asyncio.Semaphore(limits.max_concurrency)
        self._hosts: dict[str, asyncio.Semaphore] = {}
        self._clients = _ClientSlots(limits.max_per_client)

    async def execute(
        self,
        plan: ToolPlan,
        runner: NodeRunner,
        observer: Observer | None = None,
        *,
        client: str = "",
    ) -> PlanRun:
        """Run every node of ``plan`` that can run; never raises for a failed call.

        ``client`` (any stable identity, e.g. a hash of its key) shares each host's
        per-client limit with the client's other plans. Cancelling the awaiting task
        cancels every running call and re-raises.
        """
        run = _Run(plan, runner, observer or _ignore, self, client)
        started = time.perf_counter()
        try:
            async with asyncio.timeout(self._limits.deadline):
                await run.until_done()
        except TimeoutError:
            run.close_at_deadline(self._limits.deadline)
        result = PlanRun({n.id: run.records[n.id] for n in plan.nodes})
        result.wall = time.perf_counter() - started
        result.deadline_exceeded = run.deadline_passed
        return result

    def host_slot(self, host: str) -> asyncio.Semaphore:
        slot = self._hosts.get(host)
        if slot is None:
            slot = self._hosts[host] = asyncio.Semaphore(self._limits.max_per_host)
        return slot

    def client_slot(self, client: str, host: str) -> contextlib.AbstractAsyncContextManager[None]:
        return self._clients.hold(client, host)

    @contextlib.asynccontextmanager
    async def slots(self, client: str, host: str) -> AsyncIterator[None]:
        """All three limits for one call of ``client``'s to ``host``, taken in order:
        what every tool call holds, from a plan or from ``/mcp``'s ``call_tool``."""
        async with self.client_slot(client, host), self.host_slot(host), self.global_slot:
            yield

    def client_calls(self, client: str, host: str) -> int:
        """``client``'s calls to ``host`` that hold or await its per-client limit."""
        return self._clients.users(client, host)

    @property
    def clients_busy(self) -> int:
        """(client, host) pairs with a call running or waiting: what the limits remember."""
        return len(self._clients)

    @property
    def global_slot(self) -> asyncio.Semaphore:
        return self._global

    @property
    def call_timeout(self) -> float:
        return self._limits.call_timeout


class _ClientSlots:
    """One limit per client and host, forgotten when no call holds or awaits it."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._slots: dict[tuple[str, str], tuple[asyncio.Semaphore, list[int]]] = {}

    @contextlib.asynccontextmanager
    async def hold(self, client: str, host: str) -> AsyncIterator[None]:
        key = (client, host)
        semaphore, users = self._slots.setdefault(key, (asyncio.Semaphore(self._limit), [0]))
        users[0] += 1
        try:
            async with semaphore:
                yield
        finally:
            users[0] -= 1
            if not users[0]:
                del self._slots[key]

    def users(self, client: str, host: str) -> int:
        held = self._slots.get((client, host))
        return held[1][0] if held is not None else 0

    def __len__(self) -> int:
        return len(self._slots)


class _Run:
    """The state of one plan's execution."""

    def __init__(
        self,
        plan: ToolPlan,
        runner: NodeRunner,
        observer: Observer,
        scheduler: Scheduler,
        client: str,
    ) -> None:
        self.plan = plan
        self.client = client
        self.runner = runner
        self.observer = observer
        self.scheduler = scheduler
        self.records = {node.id: CallRecord(node) for node in plan.nodes}
        self.needs = {node.id: node.dependencies for node in plan.nodes}
        self.lineage = plan.lineage()
        self.missing = {node_id: len(needs) for node_id, needs in self.needs.items()}
        self.dependents = plan.dependents()
        self.clock = time.perf_counter()
        self.deadline_passed = False
        self._group: asyncio.TaskGroup | None = None

    def now(self) -> float:
        return time.perf_counter() - self.clock

    async def until_done(self) -> None:
        async with asyncio.TaskGroup() as group:
            self._group = group
            for node in self.plan.nodes:
                if self.missing[node.id] == 0:
                    self.records[node.id].ready = 0.0
                    self._start(node)

    def _start(self, node: PlanNode) -> None:
        assert self._group is not None
        self._group.create_task(self._call(node), name=f"tool:{node.id}:{node.tool}")

    async def _call(self, node: PlanNode | None) -> None:
        # The first call a finished one makes ready runs on in the same task: no
        # trip through the event loop between a call and its successor.
        while node is not None:
            record = self.records[node.id]
            host = record.host = self.runner.host(node)
            async with self.scheduler.slots(self.client, host):
                record.started = self.now()
                self.observer(record)
                try:
                    await self._invoke(node, record)
                except asyncio.CancelledError:
                    self._finish(record, Outcome.CANCELLED, "the request was cancelled")
                    raise
            ready = self._release(record)
            for other in ready[1:]:
                self._start(other)
            node = ready[0] if ready else None

    async def _invoke(self, node: PlanNode, record: CallRecord) -> None:
        # Every ancestor's output, not only the direct needs': a step that combines
        # results ("multiply the two") sees both even when the decomposition chained
        # them (s1 -> s2 -> s3, s3 needing only s2).
        context = {d: self.records[d].output for d in self.lineage[node.id]}
        timeout = node.timeout or self.scheduler.call_timeout
        window = asyncio.timeout(None)  # opened once the arguments are written
        try:
            record.arguments = bind_arguments(node, context)
            if isinstance(self.runner, PreparingRunner):
                await self.runner.prepare(node, record.arguments, context)
            try:
                output = await self._run(node, record, context, window, timeout)
            except ToolError as exc:
                # Rewritten outside any call window, like the first arguments.
                runner = self.runner
                if (
                    not rejected_input(exc)
                    or not isinstance(runner, RevisingRunner)
                    or not await runner.revise(node, record.arguments, context, exc.message)
                ):
                    raise
                window = asyncio.timeout(None)
                output = await self._run(node, record, context, window, timeout)
        except TimeoutError as exc:
            if window.expired():
                self._finish(record, Outcome.TIMEOUT, f"no result within {timeout:g}s")
            else:
                self._finish(record, Outcome.FAILED, f"timed out: {exc}")
        except MissingArguments as exc:
            record.question, record.infeasible = exc.question, True
            self._finish(record, Outcome.NEEDS_INPUT, exc.message)
        except ToolgraphError as exc:
            record.infeasible = isinstance(exc, ToolError) and (
                rejected_input(exc) or unavailable(exc)
            )
            self._finish(record, Outcome.FAILED, exc.message)
        except Exception as exc:  # a tool's own bug fails that call, never the request
            log.warning("tool %s raised", node.tool, exc_info=True)
            self._finish(record, Outcome.FAILED, f"{type(exc).__name__}: {exc}")
        else:
            record.output = output
            self._finish(record, Outcome.OK)

    async def _run(
        self,
        node: PlanNode,
        record: CallRecord,
        context: Mapping[str, JsonValue],
        window: asyncio.Timeout,
        seconds: float,
    ) -> JsonValue:
        """One call of the tool inside its own ``window`` of ``seconds``."""
        async with window:
            window.reschedule(asyncio.get_running_loop().time() + seconds)
            deadline = CALL_DEADLINE.set(window.when())
            try:
                return await self.runner.run(node, record.arguments, context)
            finally:
                CALL_DEADLINE.reset(deadline)

    def _finish(self, record: CallRecord, outcome: Outcome, error: str = "") -> None:
        record.outcome, record.error = outcome, error
        record.finished = self.now()
        metrics.TOOL_CALLS.labels(record.node.tool, outcome).inc()
        if record.started is not None:
            metrics.TOOL_CALL_LATENCY.labels(record.node.tool, outcome).observe(
                record.finished - record.started
            )
        self.observer(record)

    def _release(self, record: CallRecord) -> list[PlanNode]:
        """Pass a finished call on to the calls that wait for it; return those now ready."""
        ready = []
        for dependent_id in self.dependents[record.node.id]:
            dependent = self.records[dependent_id]
            if dependent.done:
                continue
            if record.outcome is not Outcome.OK:
                reason = f"needs {record.node.id}, which did not succeed"
                self._finish(dependent, Outcome.SKIPPED, reason)
                self._release(dependent)
                continue
            self.missing[dependent_id] -= 1
            if self.missing[dependent_id] == 0:
                dependent.ready = self.now()
                ready.append(dependent.node)
        return ready

    def close_at_deadline(self, deadline: float) -> None:
        self.deadline_passed = True
        for record in self.records.values():
            if record.outcome is Outcome.CANCELLED:
                record.outcome = Outcome.TIMEOUT
                record.error = f"the request's {deadline:g}s deadline for tools passed"
            elif not record.done:
                self._finish(record, Outcome.SKIPPED, "the request's deadline passed first")


def rejected_input(error: ToolError) -> bool:
    """Whether the tool said its input was wrong: a built-in's input error, or an HTTP
    tool's 400 or 422 (what a writer can fix, unlike a timeout or a 5xx)."""
    if isinstance(error, ToolHttpStatus):
        return error.http_status in (400, 422)
    return isinstance(error, ToolInputRejected)


#: HTTP statuses that say the tool cannot serve any call now: not authorised, the method
#: not served, the service down (a 500 or a 404 may be the arguments' doing).
UNAVAILABLE_STATUSES = frozenset({401, 403, 405, 501, 502, 503})


def unavailable(error: ToolError) -> bool:
    """Whether the tool cannot be called whatever its arguments: unreachable, not
    enabled, refused by the egress policy, or an HTTP status of
    :data:`UNAVAILABLE_STATUSES` (another candidate may serve where no argument would)."""
    if isinstance(error, ToolHttpStatus):
        return error.http_status in UNAVAILABLE_STATUSES
    return isinstance(error, ToolUnavailable | EgressDenied)


def bind_arguments(node: PlanNode, context: Mapping[str, JsonValue]) -> dict[str, JsonValue]:
    """The node's planned arguments, with every bound input filled from its source."""
    nested = any("." in binding.target for binding in node.inputs)
    arguments = copy.deepcopy(node.arguments) if nested else dict(node.arguments)
    for binding in node.inputs:
        if binding.target:
            try:
                value = select_path(context[binding.source], binding.path)
            except KeyError as exc:
                raise ToolInputRejected(
                    f"input {binding.target} from {binding.source}: {exc.args[0]}",
                    param=node.tool,
                ) from None
            _place(arguments, binding.target, value)
    return arguments


def _place(arguments: dict[str, JsonValue], target: str, value: JsonValue) -> None:
    """Set ``value`` at a dotted ``target`` (``variables.a``), making objects on the way."""
    *parents, last = target.split(".")
    where = arguments
    for part in parents:
        inner = where.get(part)
        if not isinstance(inner, dict):
            inner = where[part] = {}
        where = inner
    where[last] = value


def select_path(value: JsonValue, path: str) -> JsonValue:
    """The value at a dotted ``path`` (``items.0.id``); :class:`KeyError` if absent."""
    for part in path.split(".") if path else ():
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif (
            isinstance(value, list)
            and part.lstrip("-").isdigit()
            and -len(value) <= int(part) < len(value)
        ):
            value = value[int(part)]
        else:
            raise KeyError(f"no {part!r} in the output at {path!r}")
    return value


def _ignore(record: CallRecord) -> None:
    pass
