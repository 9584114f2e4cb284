"""Orchestrate mode's pipeline: gate → plan (the planner) → execute (the executor)
→ answer (the joiner), each stage timed into the trace and the
``toolgraph_stage_duration_seconds`` histogram.

:meth:`Pipeline.run` reads top to bottom. The ``catalog`` is loaded once; the
``gate`` (the learned "does any tool serve this?", when ``orchestrate.gate`` is
on) may send the request to the answer with no plan and no tool; the planner never
raises, it degrades; the executor runs the tool DAG in parallel and compresses
the outputs; a required value only the user can give ends the request with the
question as its answer, and no answer call; else the joiner answers, whole or
streamed. The outcome is typed (``turn.Outcome``) and kept on the turn, which the
trace is derived from. Any failure is a :class:`Failed` outcome, never an
exception; cancellation (the client went away) still propagates.

A pick that cannot run (a required value nothing in the conversation gives, an input
the tool refuses) is a failed pick: the request's sub-tasks are given tools again
without that one (no second triage or decomposition), up to ``BACKTRACKS`` times, and
the user is asked only when no other candidate runs.
A run whose calls failed otherwise is not planned again: the answer call is told
which calls failed and why, and answers from what worked (docs/architecture.md says why).

Every model call before the answer (triage, decomposition, picks, arguments, field
choices, a backtrack's re-plans) spends one of the request's
``orchestrate.max_model_calls``, and none starts in the last :data:`ANSWER_RESERVE` of
the request's time; past either the stage degrades instead of asking (a small model's
decomposition into a dozen steps once held a request to its deadline), and the answer
is asked all the same.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydantic import JsonValue

from proxy import metrics
from proxy.catalog.loaded import Catalog
from proxy.catalog.service import CatalogService
from proxy.errors import InternalError, ToolgraphError
from proxy.execute.plan import ToolPlan
from proxy.execute.progress import reported_to
from proxy.execute.scheduler import CallRecord
from proxy.execute.scheduler import Outcome as CallOutcome
from proxy.execute.service import ExecutedPlan, ToolExecutor
from proxy.llm import CallBudget, MeteredModel, UpstreamModel
from proxy.orchestrate.answer import answer_body, answer_messages, restated
from proxy.orchestrate.conversation import EarlierCall, succeeded_calls
from proxy.orchestrate.joiner import Joiner, WholeAnswer
from proxy.orchestrate.records import TurnRecords
from proxy.orchestrate.turn import (
    AnsweredDirectly,
    AnsweredFromTools,
    AskedUser,
    Failed,
    Outcome,
    Turn,
    conversation_text,
    dicts,
)
from proxy.orchestrate.values import returned_values, states_a_value
from proxy.plan.model import Plan
from proxy.tenancy.keys import scoped
from proxy.upstream import within
from retriever.conversation import conversation_query

if TYPE_CHECKING:
    from retriever.gate.catalog import CatalogGate
    from retriever.gate.model import Decision

log = logging.getLogger(__name__)

#: Re-plans after a run whose picks could not be fed, before the user is asked.
BACKTRACKS = 2
#: The gate's score from which a request is taken to need a tool without asking the
#: triage. Not its balanced threshold (0.24): at 100 tools it scores general-knowledge
#: questions of one clause up to 0.57 ("What is the chemical symbol for gold?"); no
#: no-tool question of the dev and default e2e suites scored 0.8 or more in one clause,
#: while 5 of their 13 one-tool questions did (`python -m eval.e2e` traces, gate score).
SURE_OF_A_TOOL = 0.8
#: ... and the share of the gate's bank of requests that need no tool
#: (retriever/gate/bank.txt) a request must also outscore against the catalog: in a
#: broad catalog those score 0.8 or more too (toolbench_stable's 200-API catalogs: 5-6 %
#: of chit-chat and NQ-open requests), where in a narrow one the bar stays 0.8
#: (``python -m eval.gate_rules``, docs/benchmarks.md#gate).
SURE_BANK_QUANTILE = 0.98
#: The share of a request's time left when planning starts in which no planning or
#: argument call starts, so that the answer is asked before the deadline: a small model
#: decomposing and picking on two busy cores reached an 810 s deadline with no answer.
ANSWER_RESERVE = 0.25
#: Progress for the client, when it asked for it (a stream's reasoning_content).
Say = Callable[[str], None]


def silent(text: str) -> None:
    pass


def sure_of_a_tool(decision: Decision, gate: CatalogGate) -> bool:
    """Whether the gate's score rules out the triage's "none": at least
    :data:`SURE_OF_A_TOOL`, and at least the :data:`SURE_BANK_QUANTILE` quantile of the
    scores that requests needing no tool get against the same catalog
    (``CatalogGate.bank_level``)."""
    return decision.score >= max(SURE_OF_A_TOOL, gate.bank_level(SURE_BANK_QUANTILE))


class Pipeline:
    def __init__(
        self,
        catalog: CatalogService,
        executor: ToolExecutor,
        records: TurnRecords,
        *,
        query_turns: int,
        request_timeout: float,
        max_model_calls: int,
    ) -> None:
        self.catalog = catalog
        self.executor = executor
        self.records = records
        self._query_turns = query_turns
        self._request_timeout = request_timeout
        self._max_model_calls = max_model_calls

    def _model(self, turn: Turn) -> MeteredModel:
        """The model the planner and the executor ask for ``turn``: metered into the
        turn's usage, within the request's bound on model calls, none started in the last
        :data:`ANSWER_RESERVE` of its deadline (the answer is not bounded)."""
        left = max(0.0, self._request_timeout - turn.context.elapsed())
        until = asyncio.get_running_loop().time() + left * (1 - ANSWER_RESERVE)
        budget = CallBudget(self._max_model_calls, until)
        upstream = UpstreamModel(turn.upstream, turn.target, turn.context)
        return MeteredModel(upstream, turn.usage, budget=budget)

    async def run(self, turn: Turn, joiner: Joiner, say: Say = silent) -> Outcome:
        """Take ``turn`` to its outcome within the request's deadline; keep it on the turn."""
        try:
            async with within(max(0.0, self._request_timeout - turn.context.elapsed())):
                turn.outcome = await self._run(turn, joiner, say)
        except ToolgraphError as exc:  # UpstreamTimeout at the request's deadline too
            turn.outcome = Failed(exc)
        except Exception:  # a bug: still an error the client can read
            log.exception("orchestrated request %s failed", turn.trace_id)
            turn.outcome = Failed(
                InternalError("the request failed inside toolgraph; see its trace id")
            )
        return turn.outcome

    async def _run(self, turn: Turn, joiner: Joiner, say: Say) -> Outcome:
        say("planning…")
        with turn.stage("catalog"):
            catalog = await self.catalog.get()
        earlier = await self.records.earlier(turn)
        executed = None
        if await self._gate(turn, catalog):  # else no tool serves the request: none runs
            executed = await self._plan_and_execute(turn, catalog, earlier, say)
        if executed is not None and (questions := executed.run.questions()):
            question = "\n".join(questions)
            await self.records.keep_results(turn, earlier, executed, question)
            return AskedUser(question)
        say("answering…")
        messages = answer_messages(turn.messages, executed, earlier)
        text = await joiner.answer(turn, answer_body(turn.body, turn.target.model, messages))
        if executed is not None and isinstance(joiner, WholeAnswer):
            text = await self._checked(turn, joiner, messages, executed, text)
        await self.records.keep_results(turn, earlier, executed, text)
        return AnsweredDirectly(text) if executed is None else AnsweredFromTools(text, executed)

    async def _checked(
        self,
        turn: Turn,
        joiner: WholeAnswer,
        messages: list[JsonValue],
        executed: ExecutedPlan,
        text: str,
    ) -> str:
        """The answer, asked once more when it states none of the numbers the tools
        returned (a streamed answer has gone to the client: it is not checked)."""
        values = returned_values(executed.run)
        if states_a_value(text, values):
            return text
        again = restated(messages, values)
        text = await joiner.answer(turn, answer_body(turn.body, turn.target.model, again))
        stated = states_a_value(text, values)
        if turn.plan is not None:
            turn.plan.notes.append(
                "answer check: the answer stated no returned value; asked again: "
                + ("stated" if stated else "still none")
            )
        return text

    async def plan_only(self, turn: Turn) -> tuple[Plan, ToolPlan]:
        """The plan for ``turn``'s request and its tool DAG, nothing run and no gate
        asked (``/mcp``'s ``plan``), within the request's deadline."""
        async with within(max(0.0, self._request_timeout - turn.context.elapsed())):
            catalog = await self.catalog.get()
            return await self._plan(turn, catalog, self._model(turn))

    async def _gate(self, turn: Turn, catalog: Catalog) -> bool:
        """Whether a catalog tool may serve the request (always, with the gate off)."""
        if catalog.gate is None:
            return True
        with turn.stage("gate"):
            query = conversation_query(dicts(turn.messages), self._query_turns)
            turn.gate = await asyncio.to_thread(
                catalog.gate.decide, query, self._gate_threshold(turn, catalog)
            )
        return turn.gate.needs_tool

    @staticmethod
    def _gate_threshold(turn: Turn, catalog: Catalog) -> float | None:
        """Where the routed model's planner triages, the gate refuses only when confident
        (its confident threshold) and the triage call sorts the uncertain band; else it
        decides at its balanced threshold (None: the gate's own)."""
        if (
            catalog.gate is None
            or not catalog.planner.config.for_profile(turn.target.planner).triage
        ):
            return None
        return catalog.gate.gate.spec.confident_threshold

    @staticmethod
    def _sure_of_a_tool(turn: Turn, catalog: Catalog) -> bool:
        return (
            turn.gate is not None
            and catalog.gate is not None
            and sure_of_a_tool(turn.gate, catalog.gate)
        )

    async def _plan_and_execute(
        self, turn: Turn, catalog: Catalog, earlier: list[EarlierCall], say: Say
    ) -> ExecutedPlan | None:
        """Plan and run the tools; None when the plan has no call.

        A run with a call that could not be fed (a required value missing, an input
        the tool refused after the writer's rewrite) is planned again without those
        tools, at most :data:`BACKTRACKS` times: another candidate may run where the
        first pick could not. When none is left the user is asked what the first such
        run needed, or the answer says why the first such run failed."""
        model = self._model(turn)
        reusable = earlier
        blocked: dict[str, frozenset[str]] = {}  # sub-task → tools that could not run there
        asking: _Run | None = None  # the first run that ended in a question
        first: _Run | None = None  # the first run that could not run: the likeliest pick
        backtracks = 0
        notes: list[str] = []  # the backtracks so far, for the trace's plan
        plan: Plan | None = None  # the run before: a re-plan keeps its sub-tasks
        while True:
            plan, tool_plan = await self._plan(turn, catalog, model, blocked, plan)
            plan.notes[:0] = notes
            if not tool_plan.nodes or any(
                node.tool in blocked.get(node.id, ()) for node in tool_plan.nodes
            ):
                kept = asking or first
                if kept is None:
                    return turn.executed
                return kept.settle(turn, notes)
            say("calling " + ", ".join(dict.fromkeys(node.tool for node in tool_plan.nodes)) + "…")
            executed = await self._execute(turn, catalog, tool_plan, model, reusable, say)
            run = _Run(executed, plan, tool_plan)
            infeasible = executed.run.infeasible_nodes()
            if not infeasible or backtracks == BACKTRACKS:
                break
            first = first or run
            if asking is None and executed.run.questions():
                asking = run
            for node_id, tool in infeasible.items():
                blocked[node_id] = blocked.get(node_id, frozenset()) | {tool}
            backtracks += 1
            reusable = [*reusable, *succeeded_calls(executed)]
            notes.append(f"backtrack: {', '.join(sorted(set(infeasible.values())))} could not run")
        if asking is not None and executed.run.questions():
            executed = asking.settle(turn, notes)  # what the likeliest pick needed
        elif first is not None and executed.run.infeasible():
            executed = first.settle(turn, notes)  # no candidate ran: the likeliest pick's failure
        if not executed.run.questions():  # off the request's path: embedding, writing Qdrant
            self.records.spawn(self._remember_path(catalog, plan, executed, turn.client))
        return executed

    async def _plan(
        self,
        turn: Turn,
        catalog: Catalog,
        model: MeteredModel,
        blocked: Mapping[str, frozenset[str]] | None = None,
        earlier: Plan | None = None,
    ) -> tuple[Plan, ToolPlan]:
        """The plan and its tool DAG; with ``earlier`` (a backtrack's), its sub-tasks
        given tools again, none that ``blocked`` names for that sub-task."""
        with turn.stage("plan"):
            conversation = conversation_text(turn.messages)
            planner = catalog.planner
            if turn.context.tool_scope is not None:  # the key's tools alone are candidates
                planner = await asyncio.to_thread(planner.within, turn.context.tool_scope)
            if earlier is None:
                plan = await planner.plan(
                    conversation,
                    model,
                    turn.client,
                    turn.target.planner,
                    tool_needed=self._sure_of_a_tool(turn, catalog),
                )
            else:
                plan = await planner.replan(
                    earlier, conversation, model, turn.client, turn.target.planner, blocked
                )
            tool_plan = await asyncio.to_thread(plan.tool_plan, catalog.store)
        offered = {c.tool for d in plan.decisions for c in d.candidates}
        metrics.TOOLS_SELECTED.labels("orchestrate", "offered").inc(len(offered))
        metrics.TOOLS_SELECTED.labels("orchestrate", "injected").inc(len(tool_plan.nodes))
        turn.plan, turn.tool_plan = plan, tool_plan
        return plan, tool_plan

    async def _execute(
        self,
        turn: Turn,
        catalog: Catalog,
        tool_plan: ToolPlan,
        model: MeteredModel,
        earlier: list[EarlierCall],
        say: Say,
    ) -> ExecutedPlan:
        turn.executed, turn.running = None, {}

        def observe(record: CallRecord) -> None:
            turn.running[record.node.id] = record
            if record.outcome is None:
                turn.tools_ran = True
            elif record.outcome is not CallOutcome.OK:
                say(f"{record.node.tool}: {record.outcome}")

        with turn.stage("execute"), reported_to(say):  # tools' own progress, e.g. MCP's
            turn.executed = await self.executor.execute(
                tool_plan,
                scoped(catalog.tools, turn.context.tool_scope),  # the key's tools alone
                model,
                observe,
                reuse={call.key(): call.output for call in earlier},
                background={
                    f"earlier-{i}": f"{call.tool}: {call.text}" for i, call in enumerate(earlier, 1)
                },
                client=turn.fairness,
                variables=turn.variables,
                destructive=turn.keyed,
            )
        # The tools' own time, so that the trace can tell it from toolgraph's (``own``).
        tools = turn.timings.get("tools", 0.0) + turn.executed.tool_seconds
        turn.timings["tools"] = round(tools, 6)
        return turn.executed

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


@dataclass(frozen=True, slots=True)
class _Run:
    """One run of a backtracking search: what ran, and the plan it ran."""

    executed: ExecutedPlan
    plan: Plan
    tool_plan: ToolPlan

    def settle(self, turn: Turn, notes: list[str]) -> ExecutedPlan:
        """Make this run the turn's: its calls, and the plan that chose them (with every
        backtrack noted), so that a trace shows the candidates its calls came from."""
        self.plan.notes[:] = [*notes, *(note for note in self.plan.notes if note not in notes)]
        turn.plan, turn.tool_plan, turn.executed = self.plan, self.tool_plan, self.executed
        return self.executed
