"""``toolgraph eval plan --policy llm``: the LLM planner against the configured upstream.

With ``--steps gold`` the model picks tools for the gold sub-tasks (depth-first
search, reflection); with ``--steps llm`` it also decomposes the request. Scores as
the LLM-free policies' (node and link F1 by type; candidate recall with gold steps
only, at the largest K) plus LLM calls and tokens per request and the share of
requests that fell back to the LLM-free policy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tqdm import tqdm

from eval.plan_eval import Dataset, Tally, f1, score_plan
from proxy.context import RequestContext
from proxy.execute.llm import UpstreamModel
from proxy.plan.candidates import CandidateFinder, weights_from
from proxy.plan.planner import RequestPlanner
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
) -> dict[str, float]:
    config = settings.planner.model_copy(update={"policy": "llm", "top_k": k})
    finder = CandidateFinder(data.store, index, weights_from(config), config.graph_mode)
    planner = RequestPlanner(finder, encoder, config)
    session = make_session(settings.timeouts)
    name = model_name or settings.upstream_model or "gpt-4o-mini"
    target = ModelRouter(settings).resolve(name)
    model = UpstreamModel(RelayUpstream(session), target, RequestContext(request_id="eval-plan"))
    tally, calls, tokens, fallbacks = Tally({}), 0, 0, 0
    try:
        for request in tqdm(data.requests, desc="llm", unit="request", disable=not progress):
            if steps == "gold":
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
