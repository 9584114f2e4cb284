"""The planner as orchestrate mode holds it: conversation in, :class:`Plan` out, never raising.

``policy="llm"``: decomposition, then depth-first selection with reflection, with
long-term memory examples. Whatever fails on the way (the model unreachable, its
answers unusable after the retries) degrades to the LLM-free policy over the
sub-tasks obtained so far, or over the conversation as one sub-task, and the reason
is kept in ``plan.notes`` for the trace. The long-term memory is read only for the
client ``scope`` names (a hash of its key); without one it is not read. Every plan's
steps are then checked against their tools' preconditions, repaired or refused
(:mod:`proxy.plan.preconditions`), whatever policy made it. A request the triage sorted
as one call whose one tool is refused there (a count of a set no call has made) is
decomposed after all: the triage took a chain for one call; one that names two or more
of that tool's operations (:mod:`proxy.plan.composition`) becomes one step of the tool
per operation, innermost first, without a decomposition call. A backtrack's re-plan
(:meth:`RequestPlanner.replan`) chooses tools again for the sub-tasks already made,
without asking the triage or the decomposition a second time. A client key's tool scope
makes a planner of its own (:meth:`RequestPlanner.within`) whose candidate lists hold
only the tools it allows, whose decomposition is shown only their categories, and whose
memory examples are only the past paths along them (a path of the tenant's that went
through a tool the key no longer reaches is not shown).

The event loop never waits on a store: the graph store and the index are
synchronous (Neo4j answers over the network), so every stretch of work between two
model calls that reads them runs as one hop to a worker thread (the categories, each
step's candidate list, the LLM-free policy as a whole), and the plan memory runs on
its Qdrant client's own thread.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from graph_store.errors import GraphStoreError
from proxy import metrics
from proxy.config import PlannerProfile, PlannerSettings
from proxy.errors import ToolgraphError
from proxy.llm import ChatModel, MeteredModel, metered
from proxy.plan.candidates import CandidateFinder, TrafficVotes
from proxy.plan.composition import composition_steps
from proxy.plan.decompose import decompose
from proxy.plan.model import Decision, Plan, SubTask
from proxy.plan.order import split_clauses
from proxy.plan.policy import embed_subtasks, plan_without_llm
from proxy.plan.preconditions import enforce_preconditions
from proxy.plan.prompting import PlanningFailed
from proxy.plan.search import DepthFirstSearch, search_with_reflection
from proxy.plan.triage import CLOSEST as TRIAGE_CLOSEST
from proxy.plan.triage import tool_line, triage
from proxy.plan.trust import LiveEvidence
from proxy.tenancy.keys import ToolScope
from retriever.embedder import Encoder, Vectors
from retriever.errors import RetrieverError, VectorStoreError

#: Why a request went without the triage call: what the call decides was known already.
UNTRIAGED = "triage skipped: the gate is sure a tool is needed and the request is one clause"

if TYPE_CHECKING:  # imports qdrant_client: a restart from the index snapshot plans without it
    from proxy.plan.memory import PlanMemory

log = logging.getLogger(__name__)

#: The scoped planners kept (one per distinct tool scope in use), the least recent going.
SCOPES_KEPT = 64


class RequestPlanner:
    def __init__(
        self,
        finder: CandidateFinder,
        encoder: Encoder,
        config: PlannerSettings,
        memory: PlanMemory | None = None,
        learned: Callable[[str], Awaitable[LiveEvidence | None]] | None = None,
        categories: Sequence[str] | None = None,
        tools: frozenset[str] | None = None,
        traffic: Callable[[str], TrafficVotes | None] | None = None,
    ) -> None:
        """``learned``: a client scope's observed edge evidence (None: none for it).
        ``traffic``: a client scope's served queries for retrieval (a read that computes
        nothing: :meth:`proxy.learning.retrieval.TrafficRetrieval.current`).
        ``categories``: the ones a decomposition may name (a scoped planner's: those of
        its tools); None: the catalog's. ``tools``: the names a memory example's path
        may hold (a scoped planner's); None: any."""
        self.finder = finder
        self.encoder = encoder
        self.config = config
        self.memory = memory
        self.learned = learned
        self.traffic = traffic
        self._only_categories = None if categories is None else list(categories)
        self._only_tools = tools
        self._scoped: OrderedDict[str, RequestPlanner] = OrderedDict()
        self._lock = threading.Lock()

    def within(self, scope: ToolScope | None) -> RequestPlanner:
        """This planner as a key with ``scope`` sees the catalog (None: the whole of it):
        no tool outside the scope is a candidate. Made once per scope and catalog (it may
        read a few tools from the store: call it off the event loop)."""
        if scope is None or scope.unrestricted:
            return self
        key = scope.model_dump_json()
        with self._lock:
            held = self._scoped.get(key)
        if held is None:
            store = self.finder.store
            documents = self.finder.index.documents
            allowed = scope.among(documents, store.get_tool)
            reached = [doc for doc in documents if doc.id in allowed]
            held = RequestPlanner(
                self.finder.scoped(allowed),
                self.encoder,
                self.config,
                self.memory,
                self.learned,
                sorted({doc.category for doc in reached}),
                frozenset(doc.name for doc in reached),
                self.traffic,
            )
            with self._lock:
                self._scoped[key] = held
                while len(self._scoped) > SCOPES_KEPT:
                    self._scoped.popitem(last=False)
        return held

    async def plan(
        self,
        conversation: str,
        model: ChatModel | None,
        scope: str | None = None,
        profile: PlannerProfile | None = None,
        exclude: frozenset[str] = frozenset(),
        *,
        tool_needed: bool = False,
    ) -> Plan:
        """Decompose ``conversation`` and choose a tool for every sub-task, with the
        memory of client ``scope`` as examples, in the pipeline ``profile`` names (the
        routed model's; unset, the configured ``planner.profile``). Tools in ``exclude``
        are never chosen: an earlier run found them unable to run for this request.
        ``tool_needed``: the no-tool gate is sure a tool is needed (the triage's "none"
        is ruled out), so a request of one clause is planned as one call untriaged.

        Without a catalog to search (the graph store or the retriever failing) there is
        nothing to fall back to: the plan is empty and its note says why.
        """

        async def made(planner: RequestPlanner, config: PlannerSettings) -> Plan:
            return await planner._plan(conversation, model, scope, config, exclude, tool_needed)

        return await self._checked(made, scope, profile)

    async def replan(
        self,
        earlier: Plan,
        conversation: str,
        model: ChatModel | None,
        scope: str | None = None,
        profile: PlannerProfile | None = None,
        blocked: Mapping[str, frozenset[str]] | None = None,
    ) -> Plan:
        """Tools chosen again for the sub-tasks ``earlier`` was made of (a backtrack's
        re-plan), none that ``blocked`` names for a sub-task (by its id: an earlier run
        could not run it there; it may still serve another sub-task): no triage and no
        decomposition, which were asked once for the request; asked again, they cost
        their time and may decide otherwise. The LLM-free policy keeps out every
        blocked tool everywhere."""
        subtasks = list(earlier.made) or [_whole(conversation)]
        note = "re-planned: the sub-tasks kept, their tools chosen again"
        blocked = blocked or {}
        anywhere = frozenset().union(*blocked.values())

        async def chosen(planner: RequestPlanner, config: PlannerSettings) -> Plan:
            if model is None or config.policy == "graph":
                return await planner._without_llm(subtasks, [note], anywhere)
            counted = metered(model)
            plan = await planner._select(
                conversation, subtasks, counted, scope, config, frozenset(), blocked
            )
            plan.notes.insert(0, note)
            return plan

        return await self._checked(chosen, scope, profile)

    async def _checked(
        self,
        make: Callable[[RequestPlanner, PlannerSettings], Awaitable[Plan]],
        scope: str | None,
        profile: PlannerProfile | None,
    ) -> Plan:
        """The plan ``make`` makes with ``profile``'s settings and ``scope``'s learned
        evidence, its steps checked against their tools' preconditions; an empty plan
        with a note when the catalog fails."""
        try:
            config = self.config.for_profile(profile)
            planner = await self._learned_by(scope)
            plan = await make(planner, config)
            await asyncio.to_thread(enforce_preconditions, plan, self.finder.store)
            return plan
        except (GraphStoreError, RetrieverError) as exc:
            log.warning("no plan: the catalog is unavailable: %s", exc)
            return Plan([], {}, "none", notes=[f"no plan: the catalog is unavailable: {exc}"])

    async def _learned_by(self, scope: str | None) -> RequestPlanner:
        """This planner, its finder re-ranking with ``scope``'s learned evidence and
        searching with its served queries, if any."""
        if scope is None:
            return self
        live = None if self.learned is None else await self.learned(scope)
        served = None if self.traffic is None else self.traffic(scope)
        if live is None and served is None:
            return self
        planner = copy.copy(self)
        if live is not None:
            planner.finder = planner.finder.learned(live)
        if served is not None:
            planner.finder = planner.finder.with_traffic(served)
        return planner

    async def _plan(
        self,
        conversation: str,
        model: ChatModel | None,
        scope: str | None,
        config: PlannerSettings,
        exclude: frozenset[str],
        tool_needed: bool = False,
    ) -> Plan:
        if model is None or config.policy == "graph":
            why = "no planner model" if model is None else "configured policy: graph"
            return await self._without_llm([_whole(conversation)], [why], exclude)
        counted = metered(model)
        if config.triage:
            if tool_needed and len(split_clauses(conversation)) == 1:
                plan = await self._one_call(conversation, counted, scope, config, exclude)
                plan.notes.insert(0, UNTRIAGED)
                return plan
            closest = await asyncio.to_thread(self._closest_tools, conversation)
            sort = await triage(counted, conversation, closest)
            if sort == "none":
                plan = Plan([], {}, "llm", no_tools=True, notes=["triage: no tool needed"])
                plan.llm_calls, plan.tokens = counted.usage.asked, counted.usage.total_tokens
                return plan
            if sort == "one":
                return await self._one_call(conversation, counted, scope, config, exclude)
            tool_needed = tool_needed or sort == "several"
        return await self._decomposed(
            conversation, counted, scope, config, exclude, tool_needed=tool_needed
        )

    async def _one_call(
        self,
        conversation: str,
        counted: MeteredModel,
        scope: str | None,
        config: PlannerSettings,
        exclude: frozenset[str],
    ) -> Plan:
        """The request as one sub-task, without a decomposition; decomposed after all when
        the one call cannot do it (:meth:`_not_one_call`)."""
        whole = [_whole(conversation)]
        plan = await self._select(conversation, whole, counted, scope, config, exclude)
        why = await asyncio.to_thread(self._not_one_call, plan, conversation)
        if not why:
            plan.notes.append("triage: one tool call, planned without a decomposition")
            return plan
        steps = await asyncio.to_thread(self._composition, plan, conversation)
        if steps is not None:
            composed = _composed(conversation, *steps)
            composed.notes[:0] = [*plan.notes, f"triage: one tool call, but {why}: one step each"]
            composed.llm_calls, composed.tokens = plan.llm_calls, plan.tokens
            return composed
        decomposed = await self._decomposed(
            conversation, counted, scope, config, exclude, tool_needed=True
        )
        decomposed.notes[:0] = [*plan.notes, f"triage: one tool call, but {why}: decomposed"]
        return decomposed

    def _not_one_call(self, plan: Plan, conversation: str) -> str:
        """Why the one-call ``plan`` cannot do the request, "" when it can (store reads:
        in a worker thread). Its tool is refused at plan time (it needs what an earlier
        call gives: the request is a chain), or the request names several operations of
        its operation selector (a composition, :mod:`proxy.plan.composition`)."""
        store = self.finder.store
        refused = enforce_preconditions(plan, store, starts=False)
        if refused:
            return f"{', '.join(refused.values())} needs what an earlier call gives"
        steps = self._composition(plan, conversation)
        if steps is not None:
            name, param, values = steps
            return f"the request names {len(values)} of {name}'s {param}s ({', '.join(values)})"
        return ""

    def _composition(self, plan: Plan, conversation: str) -> tuple[str, str, list[str]] | None:
        """The one-call ``plan``'s tool, its operation selector and the operations the
        request composes, innermost first, when it names two or more (store reads)."""
        for name in plan.choices.values():
            tool = self.finder.store.get_tool(name)
            steps = composition_steps(tool, conversation) if tool is not None else None
            if steps is not None:
                return name, *steps
        return None

    async def _decomposed(
        self,
        conversation: str,
        counted: MeteredModel,
        scope: str | None,
        config: PlannerSettings,
        exclude: frozenset[str],
        *,
        tool_needed: bool = False,
    ) -> Plan:
        """The request decomposed into sub-tasks, a tool chosen for each; ``tool_needed``:
        the gate or the triage decided a tool is needed ("no tools" is not an answer)."""
        try:
            categories = await asyncio.to_thread(self._categories)
            with metrics.STAGE_LATENCY.labels("decompose").time():
                found = await decompose(
                    counted,
                    conversation,
                    categories,
                    config.decompose_retries,
                    tool_needed=tool_needed,
                )
        except (ToolgraphError, PlanningFailed) as exc:
            plan = await self._without_llm([_whole(conversation)], [_fell_back(exc)], exclude)
            plan.llm_calls, plan.tokens = counted.usage.asked, counted.usage.total_tokens
            return plan
        if found.no_tools:
            plan = Plan([], {}, "llm", no_tools=True)
            plan.llm_calls, plan.tokens = counted.usage.asked, counted.usage.total_tokens
            return plan
        return await self._select(conversation, found.subtasks, counted, scope, config, exclude)

    async def plan_subtasks(
        self, conversation: str, subtasks: Sequence[SubTask], model: ChatModel | None
    ) -> Plan:
        """Choose tools for sub-tasks given from outside (the eval's gold steps)."""
        if model is None or self.config.policy == "graph":
            return await self._without_llm(subtasks, ["no planner model"])
        counted = metered(model)
        return await self._select(conversation, subtasks, counted, None, self.config, frozenset())

    async def _select(
        self,
        conversation: str,
        subtasks: Sequence[SubTask],
        counted: MeteredModel,
        scope: str | None,
        config: PlannerSettings,
        exclude: frozenset[str],
        blocked: Mapping[str, frozenset[str]] | None = None,
    ) -> Plan:
        """A tool chosen for each sub-task by the depth-first search; ``exclude`` kept
        out everywhere, ``blocked`` out of the one sub-task it names (the LLM-free
        fallback keeps both out everywhere)."""
        plan = Plan(list(subtasks), {}, "llm")
        try:
            with metrics.STAGE_LATENCY.labels("select").time():
                vectors = await asyncio.to_thread(embed_subtasks, self.encoder, subtasks)
                search = DepthFirstSearch(
                    self.finder,
                    counted,
                    config.top_k,
                    beam=config.beam,
                    examples=await self._examples(plan, vectors, scope),
                    pick=config.pick,
                    margin=config.pick_margin,
                )
                await search_with_reflection(
                    search,
                    conversation,
                    plan,
                    vectors,
                    budget=config.step_budget,
                    rounds=config.reflection_rounds,
                    exclude=exclude,
                    blocked=blocked,
                )
        except (ToolgraphError, PlanningFailed) as exc:
            anywhere = exclude.union(*(blocked or {}).values())
            plan = await self._without_llm(subtasks, [_fell_back(exc)], anywhere)
        plan.llm_calls, plan.tokens = counted.usage.asked, counted.usage.total_tokens
        plan.made = tuple(subtasks)
        return plan

    async def _without_llm(
        self,
        subtasks: Sequence[SubTask],
        notes: list[str],
        exclude: frozenset[str] = frozenset(),
    ) -> Plan:
        with metrics.STAGE_LATENCY.labels("select").time():
            plan = await asyncio.to_thread(self._plan_without_llm, subtasks, exclude)
        plan.notes += notes
        plan.made = tuple(subtasks)
        return plan

    def _plan_without_llm(
        self, subtasks: Sequence[SubTask], exclude: frozenset[str] = frozenset()
    ) -> Plan:
        """The LLM-free policy, embedding included (in a worker thread: one hop), never
        picking a tool of ``exclude``: a backtrack's re-plan moves past it here too."""
        vectors = embed_subtasks(self.encoder, subtasks)
        return plan_without_llm(
            self.finder,
            subtasks,
            vectors,
            self.config.top_k,
            beam=self.config.beam,
            order=self.finder.text_order(self.encoder),
            exclude=exclude,
        )

    def _closest_tools(self, conversation: str) -> list[str]:
        """Retrieval's first few tools for the whole request, as triage shows them."""
        vector = self.encoder.encode([conversation])[0]
        found = self.finder.retrieve(conversation, vector, TRIAGE_CLOSEST)
        tools = (self.finder.store.get_tool(candidate.tool_id) for candidate in found)
        return [tool_line(tool.name, tool.description) for tool in tools if tool is not None]

    def _categories(self) -> list[str]:
        if self._only_categories is not None:
            return self._only_categories
        return [c.name for c in self.finder.store.categories()]

    async def _examples(
        self, plan: Plan, vectors: Mapping[str, Vectors], scope: str | None
    ) -> dict[str, list[str]]:
        if self.memory is None or self.config.memory_k == 0 or scope is None:
            return {}
        try:
            found = await self.memory.recall(list(vectors.values()), self.config.memory_k, scope)
        except VectorStoreError as exc:  # examples help; planning goes on without them
            log.warning("the plan memory could not be read: %s", exc)
            plan.notes.append(f"no memory examples: {exc}")
            return {}
        if self._only_tools is None:
            return found
        return {text: path for text, path in found.items() if self._only_tools.issuperset(path)}


def _fell_back(exc: Exception) -> str:
    reason = exc.message if isinstance(exc, ToolgraphError) else str(exc)
    log.warning("planning fell back to the LLM-free policy: %s", reason)
    return f"fell back to the LLM-free policy: {reason}"


def _composed(conversation: str, tool: str, param: str, values: Sequence[str]) -> Plan:
    """One step of ``tool`` per operation of a composition, innermost first, each on the
    result of the one before: no decomposition call (a 1.5B model split "the magnitude
    of the sum" into five hand-calculation steps and ran out of model calls)."""
    request = conversation.strip()
    subtasks = [
        SubTask(
            id=f"s{i}",
            text=f"Step {i} of {len(values)}, the {param} {value}"
            + (f" on the result of s{i - 1}" if i > 1 else "")
            + f": {request}",
            needs=(f"s{i - 1}",) if i > 1 else (),
        )
        for i, value in enumerate(values, 1)
    ]
    plan = Plan(subtasks, {task.id: tool for task in subtasks}, "llm")
    plan.decisions = [
        Decision(task.id, [], tool, f"the request composes {tool}'s {param}s: {value}")
        for task, value in zip(subtasks, values, strict=True)
    ]
    plan.made = tuple(subtasks)
    return plan


def _whole(conversation: str) -> SubTask:
    return SubTask(id="s1", text=conversation.strip() or "(empty request)")
