"""``toolgraph eval plan --policy llm|vanilla|react``: LLM planners against the upstream.

The thesis's two baselines, on the gold sub-tasks, retrieval only (no graph, no
search, no reflection):

* ``vanilla``: one prompt with every sub-task and the union of their top-K
  retrieved tools, numbered; the model answers a number per sub-task.
* ``react``: one prompt per sub-task, in order: the request, the thoughts, actions
  and observations so far, the step and its top-K tools; the model answers a
  thought and an action (a number). Nothing runs in an evaluation, so the
  observation says which tool the action chose and what it does.

With ``--steps gold`` the model picks tools for the gold sub-tasks (depth-first
search, reflection); with ``--steps llm`` it also decomposes the request. Scores as
the LLM-free policies' (node and link F1 by type; candidate recall with gold steps
only, at the largest K) plus LLM calls and tokens per request and the share of
requests that fell back to the LLM-free policy.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from tqdm import tqdm

from eval.plan_catalog import plan_finder
from eval.plan_data import Dataset, Request, Tally, f1, score_plan
from proxy.context import RequestContext
from proxy.errors import ToolgraphError
from proxy.llm import Message, MeteredModel, UpstreamModel, metered
from proxy.plan.candidates import KEEP_RETRIEVED, CandidateFinder, weights_from
from proxy.plan.model import Candidate, Decision, Plan
from proxy.plan.planner import RequestPlanner
from proxy.plan.policy import embed_subtasks
from proxy.plan.prompting import prompt
from proxy.upstream import ModelRouter
from proxy.upstream.relay import RelayUpstream, make_session

if TYPE_CHECKING:
    from proxy.config import Settings
    from retriever.embedder import Encoder
    from retriever.index import ToolIndex


async def evaluate_llm(
    data: Dataset,
    encoder: Encoder,
    index: ToolIndex,
    settings: Settings,
    k: int,
    steps: str,
    model_name: str | None,
    progress: bool = True,
    policy: str = "llm",
) -> dict[str, float]:
    config = settings.planner.model_copy(update={"policy": "llm", "top_k": k})
    finder = plan_finder(
        data, index, encoder, settings.retriever, weights_from(config), config.graph_mode,
        KEEP_RETRIEVED,
    )  # fmt: skip
    planner = RequestPlanner(finder, encoder, config)
    session = make_session(settings.timeouts)
    name = model_name or settings.upstream_model or "gpt-4o-mini"
    target = ModelRouter(settings).resolve(name)
    model = UpstreamModel(RelayUpstream(session), target, RequestContext(request_id="eval-plan"))
    tally, calls, tokens, fallbacks = Tally({}), 0, 0, 0
    try:
        for request in tqdm(data.requests, desc="llm", unit="request", disable=not progress):
            if policy in BASELINES:
                baseline = BASELINES[policy]
                plan = await baseline(finder, encoder, metered(model), request, k)
                score_plan(plan, request, tally, k)
            elif steps == "gold":
                plan = await planner.plan_subtasks(request.text, request.subtasks, model)
                score_plan(plan, request, tally, k)
            else:
                plan = await planner.plan(request.text, model)
                nodes = set(plan.choices.values())
                tally.add(f"node_f1@{k}", f1(set(nodes), set(request.nodes)))
                if request.links:
                    tally.add(f"link_f1@{k}", f1(set(plan.links()), set(request.links)))
            calls, tokens = calls + plan.llm_calls, tokens + plan.tokens
            fallbacks += bool(plan.notes)
    finally:
        await session.close()
    scores = tally.means()
    count = max(1, len(data.requests))
    scores.update(
        {
            "llm_calls": round(calls / count, 2),
            "llm_tokens": round(tokens / count, 1),
            "fallback_share": round(100 * fallbacks / count, 2),
        }
    )
    return scores


async def vanilla_plan(
    finder: CandidateFinder, encoder: Encoder, model: MeteredModel, request: Request, k: int
) -> Plan:
    """All sub-tasks and their top-K tools in one prompt; one number per sub-task back."""
    vectors = embed_subtasks(encoder, request.subtasks)
    pool: dict[str, Candidate] = {}
    for task in request.subtasks:
        for candidate in finder.retrieve(task.text, vectors[task.id], k, task.category):
            pool.setdefault(candidate.tool, candidate)
    tools = list(pool.values())
    listing = [f"<request>\n{request.text}\n</request>", "", "Steps:"]
    listing += [f"- {task.id}: {task.text}" for task in request.subtasks]
    listing += ["", "Tools:"]
    listing += [_numbered(finder, number, c) for number, c in enumerate(tools, 1)]
    messages: list[Message] = [
        {"role": "system", "content": prompt("vanilla")},
        {"role": "user", "content": "\n".join(listing)},
    ]
    plan = Plan(list(request.subtasks), {}, "vanilla")
    try:
        data = await model.ask_object(messages, max_tokens=400)
    except ToolgraphError as exc:
        data, plan.notes = None, [f"the model failed: {exc.message}"]
    raw = data.get("choices") if data else None
    picks = raw if isinstance(raw, dict) else {}
    for task in request.subtasks:
        answer = picks.get(task.id)
        chosen = None
        if isinstance(answer, int) and not isinstance(answer, bool) and 1 <= answer <= len(tools):
            chosen = tools[answer - 1].tool
        if chosen is not None:
            plan.choices[task.id] = chosen
        plan.decisions.append(Decision(task.id, tools, chosen, "vanilla: one prompt"))
    plan.llm_calls, plan.tokens = model.usage.asked, model.usage.total_tokens
    return plan


async def react_plan(
    finder: CandidateFinder, encoder: Encoder, model: MeteredModel, request: Request, k: int
) -> Plan:
    """Thought, action, observation, one sub-task at a time, over retrieval's top-K."""
    vectors = embed_subtasks(encoder, request.subtasks)
    plan = Plan(list(request.subtasks), {}, "react")
    history: list[str] = []
    for task in request.subtasks:
        tools = finder.retrieve(task.text, vectors[task.id], k, task.category)
        listing = [f"<request>\n{request.text}\n</request>", "", "So far:"]
        listing += history or ["(nothing yet)"]
        listing += ["", f"Step {task.id}: {task.text}", "", "Tools:"]
        listing += [_numbered(finder, number, c) for number, c in enumerate(tools, 1)]
        listing.append("0. none of these fits")
        messages: list[Message] = [
            {"role": "system", "content": prompt("react")},
            {"role": "user", "content": "\n".join(listing)},
        ]
        try:
            data = await model.ask_object(messages, max_tokens=200)
        except ToolgraphError as exc:
            plan.notes.append(f"the model failed at {task.id}: {exc.message}")
            data = None
        action = data.get("action") if data else None
        thought = str(data.get("thought") or "") if data else ""
        chosen = None
        if isinstance(action, int) and not isinstance(action, bool) and 1 <= action <= len(tools):
            chosen = tools[action - 1]
            plan.choices[task.id] = chosen.tool
        plan.decisions.append(Decision(task.id, tools, chosen.tool if chosen else None, thought))
        history += [
            f"Thought: {thought or '(none)'}",
            f"Action: {task.id} -> {chosen.tool if chosen else 'none'}",
            f"Observation: {_observation(finder, chosen)}",
        ]
    plan.llm_calls, plan.tokens = model.usage.asked, model.usage.total_tokens
    return plan


def _numbered(finder: CandidateFinder, number: int, candidate: Candidate) -> str:
    tool = finder.store.get_tool(candidate.tool_id)
    return f"{number}. {candidate.tool}: {tool.description[:300] if tool else ''}"


def _observation(finder: CandidateFinder, chosen: Candidate | None) -> str:
    if chosen is None:
        return "no tool was chosen for this step"
    tool = finder.store.get_tool(chosen.tool_id)
    return f"{chosen.tool} was chosen: {tool.description[:200] if tool else ''}"


Baseline = Callable[[CandidateFinder, "Encoder", MeteredModel, Request, int], Awaitable[Plan]]
BASELINES: dict[str, Baseline] = {"vanilla": vanilla_plan, "react": react_plan}
