"""The sections of orchestrate mode's engine: the executor (and its credentials), the
planner, orchestrate mode itself."""

from __future__ import annotations

import os
from importlib.util import find_spec
from typing import Literal

from pydantic import (
    Field,
    model_validator,
)

from proxy.config.base import (
    PROFILES,
    PlannerProfile,
    Section,
)


class ToolCredentialSettings(Section):
    """A secret an HTTP tool needs, added to its calls to one host and shown to no LLM."""

    host: str = Field(min_length=1, description="Host the secret is sent to (exact name).")
    env: str = Field(min_length=1, description="Environment variable that holds the secret.")
    header: str | None = Field(default=None, description="Header that carries it.")
    query: str | None = Field(default=None, description="Query parameter that carries it.")
    prefix: str = Field(default="", description="Text before the secret, e.g. `Bearer `.")

    @model_validator(mode="after")
    def _one_place(self) -> ToolCredentialSettings:
        if (self.header is None) == (self.query is None):
            raise ValueError("a tool credential needs exactly one of header or query")
        return self

    def value(self) -> str | None:
        return os.environ.get(self.env)


class ExecutorSettings(Section):
    """How the proxy runs tools itself (orchestrate mode)."""

    max_concurrency: int = Field(default=32, gt=0, description="Tool calls running at once.")
    max_per_host: int = Field(
        default=4, gt=0, description="Tool calls running at once against one host."
    )
    max_per_client: int = Field(
        default=2,
        gt=0,
        description="Tool calls of one client running at once against one host (built-in "
        "tools: host `local`); below `max_per_host`, one client cannot hold all of a host.",
    )
    call_timeout: float = Field(default=30.0, gt=0, description="Seconds one tool call may take.")
    deadline: float = Field(
        default=120.0, gt=0, description="Seconds all tool calls of one request may take."
    )
    retries: int = Field(
        default=2, ge=0, le=10, description="Retries of an idempotent HTTP call on 429/5xx/errors."
    )
    retry_backoff: float = Field(
        default=0.25, ge=0, description="Seconds before the first retry; doubles each time."
    )
    max_response_bytes: int = Field(
        default=1024 * 1024, gt=0, description="Largest tool response read; a larger one fails."
    )
    allowed_hosts: list[str] = Field(
        default_factory=list,
        description="Hosts HTTP tools may call (`api.example.com`, `*.example.com`); "
        "empty allows every public host.",
    )
    allow_private_networks: bool = Field(
        default=False,
        description="Let tools reach private, loopback and link-local addresses.",
    )
    credentials: list[ToolCredentialSettings] = Field(
        default_factory=list, description="Secrets added to HTTP tool calls, by host."
    )
    sandbox_timeout: float = Field(
        default=10.0, gt=0, description="Seconds a built-in tool may compute."
    )
    sandbox_memory_mb: int = Field(
        default=1024, ge=256, description="Address space of a built-in tool's process, in MiB."
    )
    compress_chars: int = Field(
        default=1024, gt=0, description="Tool responses longer than this are compressed."
    )


class PlannerSettings(Section):
    """How orchestrate mode plans (proxy/plan; figures in proxy/plan/README.md)."""

    profile: PlannerProfile = Field(
        default="small",
        description="The pipeline of a model whose route names none: `small` (triage, "
        "`pick: confident`, no reflection; the better one end to end with a 1.5B model) or "
        "`full` (decomposition of every request, every pick asked, two reflection rounds). "
        "`triage`, `pick` and `reflection_rounds` set here win over either.",
    )

    policy: Literal["llm", "graph"] = Field(
        default="llm",
        description="`llm`: decomposition and DFS selection by the upstream model; `graph`: the "
        "LLM-free policy (also the fallback when the model fails).",
    )
    top_k: int = Field(
        default=10,
        ge=1,
        le=100,
        description="Candidates per sub-task (UltraTool: recall 82% at 5, 90% at 10).",
    )
    graph_mode: Literal["strict", "blend", "rerank"] = Field(
        default="rerank",
        description="`rerank`: retrieval's order, a tool moved up by the evidence of its edge "
        "(trust fitted on training data; never pushes retrieval's hits out on uninformative "
        "graphs); `strict`: graph neighbours first, retrieval tops up; `blend`: neighbours "
        "and retrieval hits ranked on one score.",
    )
    beam: int = Field(
        default=2,
        ge=0,
        le=20,
        description="Runners-up of a needed sub-task whose graph neighbours are offered too, at "
        "half the edge bonus (a hedge against a wrong earlier pick).",
    )
    strong_bonus: float = Field(
        default=0.3, ge=0, le=2, description="Score added to a candidate over a STRONG_DEP edge."
    )
    weak_bonus: float = Field(
        default=0.2, ge=0, le=2, description="Score added to a candidate over a WEAK_DEP edge."
    )
    sequential_bonus: float = Field(
        default=0.1, ge=0, le=2, description="Score added to a candidate over a SEQUENTIAL edge."
    )
    triage: bool = Field(
        default=True,
        description="Before the decomposition, one short LLM call (a few examples, a one-word "
        "answer) sorts the request: `none` needs no tool, `one` is planned as a single sub-task "
        "without a decomposition, `several` is decomposed. For small models, whose "
        "decompositions split one calculation into hand-calculation steps.",
    )
    pick: Literal["llm", "confident", "first"] = Field(
        default="confident",
        description="How a sub-task's tool is chosen from its candidates: `llm` asks the model; "
        "`confident` takes the first candidate without asking when it is also the most similar "
        "by at least `pick_margin`, and asks otherwise (always when there is a single "
        "candidate: nothing to compare with); `first` always takes the first (no "
        "LLM call, as the `graph` policy picks).",
    )
    pick_margin: float = Field(
        default=0.05,
        ge=0,
        le=1,
        description="With `pick: confident`: how much more similar than every other candidate "
        "the first must be to be taken without asking.",
    )
    decompose_retries: int = Field(
        default=2, ge=0, le=10, description="Retries of a decomposition that fails validation."
    )
    step_budget: int = Field(
        default=12, ge=1, le=200, description="LLM selection steps (picks and backtracks) per plan."
    )
    reflection_rounds: int = Field(
        default=0, ge=0, le=10, description="Times a path judged wrong is searched again."
    )
    memory_k: int = Field(
        default=3,
        ge=0,
        le=20,
        description="Similar past successful paths of the same client shown to the model.",
    )
    memory_collection: str = Field(
        default="plan_memory",
        pattern=r"^[A-Za-z0-9_-]{1,64}$",
        description="Qdrant collection of the long-term memory.",
    )

    @model_validator(mode="after")
    def _profile_defaults(self) -> PlannerSettings:
        """The profile's settings for what the configuration leaves unset."""
        for name, value in PROFILES[self.profile].items():
            if name not in self.model_fields_set:
                object.__setattr__(self, name, value)  # frozen: set once, while validating
        return self

    def for_profile(self, profile: PlannerProfile | None) -> PlannerSettings:
        """These settings under ``profile`` (a route's), keeping what was set explicitly."""
        if profile is None or profile == self.profile:
            return self
        explicit = self.model_dump(include=self.model_fields_set - {"profile"})
        return PlannerSettings.model_validate({**explicit, "profile": profile})


class OrchestrateSettings(Section):
    """Orchestrate mode: the catalog it loads, the answer stream, traces and replays."""

    builtin_tools: bool = Field(
        default=True,
        description="Import the built-in tool pack (math and physics, runs offline) into the "
        "catalog at start-up. Left unset, it is off when SymPy (the `packs` extra) is not "
        "installed; set on, the start stops without it.",
    )
    preload: bool = Field(
        default=True,
        description="Load the embedding model and the catalog in the background at start-up: "
        "`/readyz` answers 503 `loading` until they are ready, and a select or orchestrate "
        "request that comes first waits for them (within `timeouts.request`). Off: the first "
        "such request loads them, and a process serving passthrough only never loads the model.",
    )
    catalog_check_interval: float = Field(
        default=1.0,
        ge=0,
        description="Seconds between checks of the graph store's catalog stamp on the request "
        "path: how late a tool another worker or replica registered, replaced or deleted may be "
        "used here (a notice through Redis makes it sooner).",
    )
    gate: bool = Field(
        default=True,
        description="Ask the learned no-tool gate first (retriever/gate): a request no catalog "
        "tool serves is answered by the upstream directly, without planning (the trace says "
        "`gate: no_tool` and its score). Its threshold is the balanced one (best balanced "
        "accuracy on tool against no tool out of source, keeping 95 % of tool requests), "
        "raised to the catalog's cutoff on a broad catalog; with "
        "`planner.triage` on it refuses only when confident (99 % of tool requests kept) and "
        "the triage call sorts the rest. Off: every request is planned.",
    )
    keepalive: float = Field(
        default=5.0, gt=0, description="Seconds between SSE keep-alive comments while tools run."
    )
    trace_ttl: int = Field(default=24 * 3600, gt=0, description="Seconds a request trace is kept.")
    max_traces: int = Field(
        default=1000,
        gt=0,
        description="Traces kept, in process or in Redis (the oldest goes first); one trace "
        "over 4 MiB is not kept.",
    )
    max_trace_bytes: int = Field(
        default=256 * 1024 * 1024,
        gt=0,
        description="Bytes all kept traces hold together, every tenant's (the oldest goes "
        "first): the most traces take of the proxy's memory, or of Redis'.",
    )
    tenant_trace_bytes: int = Field(
        default=32 * 1024 * 1024,
        gt=0,
        description="Bytes one tenant's (one key's) kept traces hold together: past it that "
        "tenant's oldest trace goes, never another tenant's.",
    )
    idempotency_ttl: int = Field(
        default=24 * 3600, gt=0, description="Seconds an `Idempotency-Key` and its answer are kept."
    )
    max_idempotency_keys: int = Field(
        default=100_000,
        gt=0,
        description="`Idempotency-Key`s kept, in process or in Redis (there for all replicas "
        "together); when all are within their TTL a new key is refused (503 "
        "`idempotency_keys_full`), none forgotten. Size it as keyed requests per second times "
        "`idempotency_ttl`: the default holds 1.1 a second for a day.",
    )
    max_idempotency_bytes: int = Field(
        default=512 * 1024 * 1024,
        gt=0,
        description="Bytes the kept `Idempotency-Key`s and their answers hold together, every "
        "tenant's (a key costs its answer and about 300 bytes); when they are held a new key "
        "is refused (503 `idempotency_keys_full`).",
    )
    tenant_idempotency_bytes: int = Field(
        default=32 * 1024 * 1024,
        gt=0,
        description="Bytes one tenant's (one key's) `Idempotency-Key`s and answers hold "
        "together: past it that tenant's new keys are refused (429 `idempotency_keys_full`, "
        "`retry-after`) while every other tenant's are still taken. The default holds some "
        "25,000 keys with answers of 1 KB.",
    )
    conversation_ttl: int = Field(
        default=24 * 3600,
        gt=0,
        description="Seconds the tool results of an answered turn stay reusable by follow-ups.",
    )
    max_conversations: int = Field(
        default=1000,
        gt=0,
        description="Answered turns whose tool results are kept, in process or in Redis (the "
        "oldest goes first).",
    )
    max_conversation_bytes: int = Field(
        default=256 * 1024 * 1024,
        gt=0,
        description="Bytes the kept tool results of answered turns hold together, every "
        "tenant's (the oldest goes first).",
    )
    tenant_conversation_bytes: int = Field(
        default=32 * 1024 * 1024,
        gt=0,
        description="Bytes one tenant's (one key's) kept turn results hold together: past it "
        "that tenant's oldest go, never another tenant's (a follow-up of theirs runs its "
        "tools again).",
    )
    max_reused_results: int = Field(
        default=16, ge=0, le=256, description="Earlier tool results a follow-up may reuse."
    )
    max_model_calls: int = Field(
        default=24,
        ge=1,
        le=1000,
        description="Model calls one orchestrated request may make before its answer "
        "(triage, decomposition, picks, reflection, arguments, field choices, the re-plans "
        "of a backtrack included): past it the planner falls back to its LLM-free policy "
        "and a call whose arguments are still unwritten fails; the answer is still asked.",
    )

    @model_validator(mode="after")
    def _builtin_tools_installed(self) -> OrchestrateSettings:
        # The math pack runs on SymPy, which the packs extra installs: unset, the pack is
        # left out of an install without it rather than stopping a passthrough deployment.
        if "builtin_tools" not in self.model_fields_set and find_spec("sympy") is None:
            object.__setattr__(self, "builtin_tools", False)  # frozen: set once, while validating
        return self


class LearningSettings(Section):
    """Learning from traffic: what answered requests teach the planner, per tenant."""

    enabled: bool = Field(
        default=False,
        description="Record what each orchestrated request's run shows (which tool's output fed "
        "which, and how that call went; each pick and the candidates it beat) and which "
        "forwarded tools a select-mode reply called, and which queries each kept tool served, "
        "per tenant, after the answer; and let the planner's re-ranking read the tenant's "
        "observed edges and the catalog search its served queries (`retrieval`). Off by "
        "default: on the replay benchmarks (docs/benchmarks.md) it does not meet its targets "
        "on every set.",
    )
    off_tenants: list[str] = Field(
        default_factory=list,
        description="Tenants (the ids the learning admin API lists) that neither record nor "
        "read learned evidence while `enabled` is on.",
    )
    prior_strength: float = Field(
        default=10.0,
        gt=0,
        description="How many observed transitions out of a tool weigh as much as the offline "
        "edge trust (`proxy/plan/edge_trust.json`) about where it leads: the weight of the "
        "prior in each edge's Beta posterior, so that a few requests cannot swing it.",
    )
    max_entries: int = Field(
        default=5000,
        gt=0,
        description="Learned counts (edges, picks, select-mode uses) kept per tenant; past it "
        "the least recently updated goes.",
    )
    max_tenants: int = Field(
        default=1000,
        gt=0,
        description="Tenants whose learned state is kept; past it the one updated longest ago "
        "is dropped whole.",
    )
    retrieval: bool = Field(
        default=True,
        description="While `enabled`: the catalog search (orchestrate mode's candidate lists) "
        "adds to each tool's score a vote of the tenant's earlier queries the tool served "
        "(k-NN over their vectors, rebuilt in the background and kept only when it does not "
        "lower NDCG@5 on a held-out slice of the tenant's own traffic).",
    )
    retrieval_weight: float = Field(
        default=1.0,
        ge=0,
        description="The most a tool's vote adds to its fused retrieval score (whose best "
        "tool scores about 1): how far served queries can move a tool.",
    )
    retrieval_prior: float = Field(
        default=4.0,
        gt=0,
        description="The votes of unseen traffic a tool's share is shrunk by: one or two "
        "served queries move it a little, many similar ones far.",
    )
    refresh: float = Field(
        default=30.0,
        ge=0,
        description="Seconds a worker plans with a tenant's learned state before it reads it "
        "again from the store (writes of its own refresh it at once): how late another worker "
        "or replica's learning reaches this one.",
    )
