"""toolgraph's settings: one typed object, loaded once at start-up and passed down.

Sources, strongest first: keyword overrides (the CLI's ``--host``/``--port``),
``TOOLGRAPH_*`` environment variables (nested keys with ``__``, e.g.
``TOOLGRAPH_LIMITS__MAX_BODY_BYTES``), the YAML file named by ``--config`` or
``TOOLGRAPH_CONFIG``, then the defaults below. Anything invalid, including an
unknown key in the file or an unknown ``TOOLGRAPH_`` variable, stops start-up with
a :class:`ConfigError` that names the key.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterable
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Literal
from urllib.parse import unquote, urlsplit

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    InitSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
)

from retriever.config import RetrieverConfig

ENV_PREFIX = "TOOLGRAPH_"
CONFIG_FILE_ENV = "TOOLGRAPH_CONFIG"

#: The planner pipelines a route chooses between (``Planner.profile``, ``ModelRoute.planner``):
#: the settings each gives where the configuration does not set them itself
#: (the table and figures are in docs/orchestrate.md).
PlannerProfile = Literal["small", "full"]
PROFILES: dict[PlannerProfile, dict[str, Any]] = {
    "small": {"triage": True, "pick": "confident", "reflection_rounds": 0},
    "full": {"triage": False, "pick": "llm", "reflection_rounds": 2},
}

_file_data: ContextVar[dict[str, Any] | None] = ContextVar("toolgraph_config_file", default=None)


class ConfigError(Exception):
    """Settings that cannot be used; the message names every offending key."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelRoute(_Section):
    """One entry of the routing table: a model name clients send, and where it goes."""

    name: str = Field(min_length=1, description="The model name clients send.")
    litellm_model: str = Field(
        min_length=1,
        description="litellm's `provider/model`, e.g. `openai/gpt-4o`.",
    )
    base_url: str | None = Field(
        default=None, description="The provider's API base URL; the provider's default when unset."
    )
    api_key_env: str | None = Field(
        default=None,
        description="Name of the environment variable that holds this upstream's key.",
    )
    api: Literal["auto", "relay", "litellm"] = Field(
        default="auto",
        description="`relay` streams bytes to an OpenAI-compatible API, `litellm` translates; "
        "`auto` relays for the `openai` and `hosted_vllm` providers.",
    )
    responses: Literal["auto", "native", "translate"] | None = Field(
        default=None,
        description="`upstream_responses` for this route alone; unset, the global one.",
    )
    planner: PlannerProfile | None = Field(
        default=None,
        description="The planner pipeline orchestrate mode runs for this model (`small` or "
        "`full`, see `planner.profile`); unset, `planner.profile`.",
    )

    @field_validator("base_url")
    @classmethod
    def _check_url(cls, value: str | None) -> str | None:
        return _check_http_url(value)

    def api_key(self) -> str | None:
        if self.api_key_env is None:
            return None
        return os.environ.get(self.api_key_env)


class Limits(_Section):
    max_body_bytes: int = Field(default=16 * 1024 * 1024, gt=0, description="Largest request body.")
    max_messages: int = Field(default=4096, gt=0, description="Most messages in one request.")
    max_tools: int = Field(default=8192, gt=0, description="Most tools in one request.")
    max_json_depth: int = Field(
        default=128,
        gt=0,
        le=250,
        description="Deepest nesting of a request body (orjson encodes at most 255 levels).",
    )


class Timeouts(_Section):
    upstream_connect: float = Field(default=10.0, gt=0, description="Seconds to connect upstream.")
    upstream_read: float = Field(
        default=300.0, gt=0, description="Seconds the upstream may stay silent mid-answer."
    )
    request: float = Field(default=900.0, gt=0, description="Seconds one request may take.")


class ToolCredential(_Section):
    """A secret an HTTP tool needs, added to its calls to one host and shown to no LLM."""

    host: str = Field(min_length=1, description="Host the secret is sent to (exact name).")
    env: str = Field(min_length=1, description="Environment variable that holds the secret.")
    header: str | None = Field(default=None, description="Header that carries it.")
    query: str | None = Field(default=None, description="Query parameter that carries it.")
    prefix: str = Field(default="", description="Text before the secret, e.g. `Bearer `.")

    @model_validator(mode="after")
    def _one_place(self) -> ToolCredential:
        if (self.header is None) == (self.query is None):
            raise ValueError("a tool credential needs exactly one of header or query")
        return self

    def value(self) -> str | None:
        return os.environ.get(self.env)


class Executor(_Section):
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
    credentials: list[ToolCredential] = Field(
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


class Planner(_Section):
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
    def _profile_defaults(self) -> Planner:
        """The profile's settings for what the configuration leaves unset."""
        for name, value in PROFILES[self.profile].items():
            if name not in self.model_fields_set:
                object.__setattr__(self, name, value)  # frozen: set once, while validating
        return self

    def for_profile(self, profile: PlannerProfile | None) -> Planner:
        """These settings under ``profile`` (a route's), keeping what was set explicitly."""
        if profile is None or profile == self.profile:
            return self
        explicit = self.model_dump(include=self.model_fields_set - {"profile"})
        return Planner.model_validate({**explicit, "profile": profile})


class Orchestrate(_Section):
    """Orchestrate mode: the catalog it loads, the answer stream, traces and replays."""

    builtin_tools: bool = Field(
        default=True,
        description="Import the built-in tool pack (math and physics, runs offline) into the "
        "catalog at start-up.",
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
        "`gate: no_tool` and its score). Its threshold is cautious (fitted to keep 98 % of "
        "the requests that need a tool on the tool side), so it skips planning only where it "
        "is sure; off: every request is planned.",
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
    max_reused_results: int = Field(
        default=16, ge=0, le=256, description="Earlier tool results a follow-up may reuse."
    )


class Responses(_Section):
    """`/v1/responses`: the responses kept for `previous_response_id` and `GET`."""

    store_ttl: int = Field(
        default=24 * 3600,
        gt=0,
        description="Seconds a stored response (and the conversation up to it) is kept.",
    )
    max_stored: int = Field(
        default=2000,
        gt=0,
        description="Responses kept, in process or in Redis (there for all replicas together); "
        "the oldest goes first. Times `max_stored_bytes`, the most they hold (2 GiB).",
    )
    max_stored_bytes: int = Field(
        default=1024 * 1024,
        gt=0,
        description="Largest stored response with its conversation (each keeps the whole "
        "conversation up to it); a larger one is answered, logged and not stored.",
    )


class McpServer(_Section):
    """One MCP server whose tools join the catalog: a command line (stdio) or a URL
    (streamable HTTP), one of the two."""

    name: str = Field(
        pattern=r"^[A-Za-z0-9_-]{1,32}$",
        description="The server's name: its tools are named `<name>_<tool>` in the catalog.",
    )
    command: list[str] = Field(
        default_factory=list, description="stdio: the server's argv, e.g. `[npx, my-server]`."
    )
    env: dict[str, str] = Field(
        default_factory=dict,
        description="stdio: environment variables for the server, over a minimal inherited set "
        "(PATH, HOME…).",
    )
    cwd: Path | None = Field(default=None, description="stdio: the server's working directory.")
    url: str | None = Field(default=None, description="Streamable HTTP: the server's endpoint.")
    headers: dict[str, str] = Field(
        default_factory=dict,
        description="Streamable HTTP: headers sent with every request; a value `env:NAME` is "
        "read from that environment variable (keys stay out of the YAML).",
    )
    connect_timeout: float = Field(
        default=30.0, gt=0, description="Seconds to start the server and finish `initialize`."
    )
    call_timeout: float | None = Field(
        default=None,
        gt=0,
        description="Seconds one `tools/call` may take; `executor.call_timeout` if unset.",
    )

    @field_validator("url")
    @classmethod
    def _check_url(cls, value: str | None) -> str | None:
        return _check_http_url(value)

    @model_validator(mode="after")
    def _one_transport(self) -> McpServer:
        if bool(self.command) == (self.url is not None):
            raise ValueError("an MCP server needs exactly one of command (stdio) or url (HTTP)")
        return self

    def header_values(self) -> dict[str, str]:
        """The headers with every `env:NAME` value read from the environment (missing: empty)."""
        return {
            key: os.environ.get(value[4:], "") if value.startswith("env:") else value
            for key, value in self.headers.items()
        }


class DatabasePack(_Section):
    """One database the database pack navigates (proxy/tools/database); its tools are
    named ``<name>_<tool>``, e.g. ``chinook_run_select``."""

    name: str = Field(
        pattern=r"^[a-z][a-z0-9_]{0,30}$",
        description="Short name, the prefix of the database's tools (`chinook`).",
    )
    url: str = Field(
        min_length=1,
        description="SQLAlchemy URL: `sqlite:///path/to/file.db` (opened with `mode=ro`) or "
        "`postgresql+psycopg://user:password@host/db` (read-only transactions); use a role "
        "that may only read. `demo` for the music-store database shipped in the package.",
    )
    description: str = Field(
        default="", description="What the database holds, in a sentence, for tool retrieval."
    )
    read_only: Literal[True] = Field(
        default=True,
        description="Always true: the pack refuses anything but one SELECT before it reaches "
        "the database, and connects read-only besides.",
    )
    max_rows: int = Field(default=100, gt=0, le=10_000, description="Rows a SELECT returns.")
    statement_timeout: float = Field(
        default=10.0, gt=0, description="Seconds one statement may run in the database."
    )

    @field_validator("url")
    @classmethod
    def _check_backend(cls, value: str) -> str:
        if value == "demo":
            return value
        if not value.startswith(("sqlite:", "sqlite+pysqlite:", "postgresql")):
            raise ValueError("must be a sqlite:/// or postgresql:// SQLAlchemy URL")
        if value.startswith("sqlite") and value.split("///", 1)[-1] in ("", ":memory:"):
            raise ValueError("a SQLite URL must name a file: sqlite:///path/to/file.db")
        return value

    def password(self) -> str | None:
        secret = urlsplit(self.url).password if "@" in self.url else None
        return unquote(secret) if secret else None


class KnowledgeGraphPack(_Section):
    """One graph the knowledge-graph pack navigates (proxy/tools/knowledge_graph); its
    tools are named ``<name>_<tool>``, e.g. ``geo_get_neighbors``."""

    name: str = Field(
        pattern=r"^[a-z][a-z0-9_]{0,30}$",
        description="Short name, the prefix of the graph's tools (`geo`).",
    )
    kind: Literal["rdf", "bolt"] = Field(
        default="rdf",
        description="`rdf`: triples queried with SPARQL (a file or store directory in `path`, "
        "or an endpoint in `url`); `bolt`: a Neo4j (or Bolt-speaking) server in `url`.",
    )
    path: Path | None = Field(
        default=None,
        description="rdf only: a file of triples (`.ttl`, `.nt`, `.nq`, `.trig`, `.rdf`, "
        "`.jsonld`) loaded into memory at start, or an Oxigraph store directory opened "
        "read-only; `demo` for the geography graph shipped in the package.",
    )
    url: str | None = Field(
        default=None,
        description="rdf: a SPARQL endpoint (`https://host/sparql`, queried with the SPARQL "
        "protocol's query operation, which takes no update); bolt: "
        "`bolt://user:password@host:7687/database` (read transactions; give it a role "
        "that may only read).",
    )
    description: str = Field(
        default="", description="What the graph holds, in a sentence, for tool retrieval."
    )
    name_property: str = Field(
        default="name",
        min_length=1,
        description="bolt only: the node property that holds an entity's name.",
    )
    max_entities: int = Field(
        default=10_000,
        gt=0,
        le=100_000,
        description="Entities one variable holds; a larger set is cut and says so.",
    )
    timeout: float = Field(default=10.0, gt=0, description="Seconds one graph query may run.")

    @model_validator(mode="after")
    def _check_source(self) -> KnowledgeGraphPack:
        if (self.path is None) == (self.url is None):
            raise ValueError(f"knowledge graph {self.name}: give exactly one of path and url")
        if self.kind == "bolt" and self.path is not None:
            raise ValueError(f"knowledge graph {self.name}: a bolt graph has a url, not a path")
        if self.kind == "bolt" and not (self.url or "").startswith(("bolt", "neo4j")):
            raise ValueError(f"knowledge graph {self.name}: bolt needs a bolt:// or neo4j:// url")
        if self.kind == "rdf" and self.url and not self.url.startswith(("http://", "https://")):
            raise ValueError(f"knowledge graph {self.name}: a SPARQL endpoint is an http(s) url")
        return self

    def password(self) -> str | None:
        secret = urlsplit(self.url).password if self.url and "@" in self.url else None
        return unquote(secret) if secret else None


class Packs(_Section):
    """Tool packs built from settings, beside the built-in math pack."""

    database: list[DatabasePack] = Field(
        default_factory=list, description="Databases the database pack navigates, read-only."
    )
    knowledge_graph: list[KnowledgeGraphPack] = Field(
        default_factory=list,
        description="Graphs the knowledge-graph pack navigates, read-only (RDF or Bolt).",
    )

    @field_validator("database")
    @classmethod
    def _unique(cls, databases: list[DatabasePack]) -> list[DatabasePack]:
        if twice := _used_twice(database.name for database in databases):
            raise ValueError(f"database names used twice: {', '.join(twice)}")
        return databases

    @field_validator("knowledge_graph")
    @classmethod
    def _unique_graphs(cls, graphs: list[KnowledgeGraphPack]) -> list[KnowledgeGraphPack]:
        if twice := _used_twice(graph.name for graph in graphs):
            raise ValueError(f"knowledge graph names used twice: {', '.join(twice)}")
        return graphs


class Retriever(RetrieverConfig, _Section):
    """Embeddings, the catalog index and select mode (see retriever/README.md)."""


class Settings(BaseSettings):
    """Everything toolgraph can be told. Field descriptions are the reference docs."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter="__",
        extra="forbid",
        frozen=True,
    )

    host: str = Field(default="127.0.0.1", description="Address to listen on.")
    port: int = Field(default=8000, ge=0, le=65535, description="Port to listen on.")
    workers: int = Field(default=1, ge=1, le=256, description="uvicorn worker processes.")
    log_level: Literal["debug", "info", "warning", "error"] = Field(
        default="info", description="Log level of toolgraph's own loggers."
    )
    upstream_base_url: str = Field(
        default="https://api.openai.com/v1",
        description="OpenAI-compatible base URL for models the routing table does not name.",
    )
    upstream_api_key: SecretStr | None = Field(
        default=None,
        description="Key for the default upstream. Unset and no master key: the client's own "
        "bearer token is forwarded.",
    )
    upstream_model: str | None = Field(
        default=None,
        description="litellm model used when the routing table has no entry for the requested "
        "model; unset, the requested name is sent to the default upstream as it is.",
    )
    upstream_responses: Literal["auto", "native", "translate"] = Field(
        default="auto",
        description="How `/v1/responses` reaches an OpenAI-compatible upstream: `native` relays "
        "the request as it is to the upstream's own `/v1/responses`, `translate` goes through "
        "its chat completions, `auto` asks each upstream once (a `POST /responses` of the model "
        "alone) and remembers. Select and orchestrate modes, and litellm routes, always translate.",
    )
    master_key: SecretStr | None = Field(
        default=None, description="When set, clients must send it as `Authorization: Bearer`."
    )
    admin_key: SecretStr | None = Field(
        default=None,
        description="Opens the tool registry API (`/v1/toolgraph/tools`) to clients that send "
        "it as `Authorization: Bearer`; the registry is closed while unset.",
    )
    data_dir: Path = Field(
        default=Path.home() / ".local" / "share" / "toolgraph",
        description="Directory of the embedded stores.",
    )
    redis_url: str | None = Field(
        default=None, description="Redis URL; in-process caches if unset."
    )
    qdrant_url: str | None = Field(
        default=None, description="Qdrant server URL; local mode under data_dir if unset."
    )

    @field_validator("qdrant_url")
    @classmethod
    def _check_qdrant(cls, value: str | None) -> str | None:
        return _check_http_url(value)

    neo4j_uri: str | None = Field(
        default=None, description="Neo4j Bolt URI; the in-process graph under data_dir if unset."
    )
    default_mode: Literal["passthrough", "select", "orchestrate"] = Field(
        default="passthrough",
        description="Mode of a request that names none (`toolgraph.mode` or `x-toolgraph-mode`); "
        "a request with tools or tool results of its own is never orchestrated by default.",
    )
    models: list[ModelRoute] = Field(default_factory=list, description="The routing table.")
    limits: Limits = Field(default_factory=Limits)
    timeouts: Timeouts = Field(default_factory=Timeouts)
    retriever: Retriever = Field(default_factory=Retriever)
    executor: Executor = Field(default_factory=Executor)
    planner: Planner = Field(default_factory=Planner)
    orchestrate: Orchestrate = Field(default_factory=Orchestrate)
    responses: Responses = Field(default_factory=Responses)
    packs: Packs = Field(default_factory=Packs)
    mcp_servers: list[McpServer] = Field(
        default_factory=list,
        description="MCP servers whose tools join the catalog (stdio `{name, command, env, cwd}` "
        "or streamable HTTP `{name, url, headers}`); run in orchestrate mode through `tools/call`.",
    )
    mcp_registry_commands: bool = Field(
        default=False,
        description="Whether the registry API (admin key) may add stdio MCP servers, each a "
        "command run on this host; off, it adds HTTP servers only.",
    )

    @field_validator("retriever")
    @classmethod
    def _onnx_under_data_dir(cls, value: Retriever, info: ValidationInfo) -> Retriever:
        data_dir = info.data.get("data_dir")
        if value.onnx_dir is not None or not isinstance(data_dir, Path):
            return value
        return value.model_copy(update={"onnx_dir": data_dir / "onnx"})

    @field_validator("upstream_base_url")
    @classmethod
    def _check_upstream(cls, value: str) -> str:
        checked = _check_http_url(value)
        assert checked is not None
        return checked

    @field_validator("models")
    @classmethod
    def _check_routes(cls, routes: list[ModelRoute]) -> list[ModelRoute]:
        seen: set[str] = set()
        for route in routes:
            if route.name in seen:
                raise ValueError(f"model {route.name!r} is routed twice")
            seen.add(route.name)
        return routes

    @field_validator("mcp_servers")
    @classmethod
    def _check_mcp_names(cls, servers: list[McpServer]) -> list[McpServer]:
        if twice := _used_twice(server.name for server in servers):
            raise ValueError(f"MCP server names must be unique: {', '.join(twice)}")
        return servers

    def secrets(self) -> list[str]:
        """Every key toolgraph knows, so that none is ever echoed to a client."""
        held = (self.upstream_api_key, self.master_key, self.admin_key)
        keys = [s.get_secret_value() for s in held if s]
        keys += [key for route in self.models if (key := route.api_key())]
        if self.neo4j_uri and (password := urlsplit(self.neo4j_uri).password):
            keys.append(unquote(password))
        keys += [key for cred in self.executor.credentials if (key := cred.value())]
        keys += [
            value
            for server in self.mcp_servers
            for name, value in server.header_values().items()
            if value and server.headers[name].startswith("env:")
        ]
        keys += [key for database in self.packs.database if (key := database.password())]
        keys += [key for graph in self.packs.knowledge_graph if (key := graph.password())]
        return keys

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return init_settings, env_settings, InitSettingsSource(settings_cls, _file_data.get() or {})


def load_settings(config_file: Path | str | None = None, **overrides: Any) -> Settings:
    """Load and validate the settings, or raise :class:`ConfigError` naming what is wrong."""
    path = config_file or os.environ.get(CONFIG_FILE_ENV)
    data = _read_config_file(Path(path)) if path else {}
    problems = _unknown_env_vars()
    token = _file_data.set(data)
    try:
        settings = Settings(**{k: v for k, v in overrides.items() if v is not None})
    except ValidationError as exc:
        problems += [_describe(error) for error in exc.errors()]
        settings = None
    except SettingsError as exc:  # a TOOLGRAPH_ list or mapping whose value is not JSON
        field = re.search(r'field "([^"]+)"', str(exc))
        name = field.group(1) if field else "a setting"
        problems.append(f"{ENV_PREFIX}{name.upper()}: must be JSON for a list or mapping")
        settings = None
    finally:
        _file_data.reset(token)
    if settings is not None:
        problems += _missing_route_keys(settings)
    if problems:
        origin = f" (config file {path})" if path else ""
        raise ConfigError(f"invalid settings{origin}: " + "; ".join(problems))
    assert settings is not None
    return settings


def _read_config_file(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None)
        detail = f" ({problem})" if problem else ""
        raise ConfigError(f"config file {path}{where}: not valid YAML{detail}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path}: the top level must be a mapping of settings")
    return data


def _unknown_env_vars() -> list[str]:
    known = {ENV_PREFIX + name.upper() for name in Settings.model_fields}
    known.add(CONFIG_FILE_ENV)
    nested = {
        name: field.annotation
        for name, field in Settings.model_fields.items()
        if isinstance(field.annotation, type) and issubclass(field.annotation, _Section)
    }
    for section, model in nested.items():
        known |= {f"{ENV_PREFIX}{section.upper()}__{sub.upper()}" for sub in model.model_fields}
    return [
        f"{name}: unknown setting"
        for name in sorted(os.environ)
        if name.upper().startswith(ENV_PREFIX) and name.upper() not in known
    ]


def _missing_route_keys(settings: Settings) -> list[str]:
    return [
        f"models.{i}.api_key_env: environment variable {route.api_key_env} is not set"
        for i, route in enumerate(settings.models)
        if route.api_key_env and route.api_key_env not in os.environ
    ]


def _describe(error: Any) -> str:
    key = ".".join(str(part) for part in error["loc"]) or "settings"
    if error["type"] == "extra_forbidden":
        return f"{key}: unknown setting"
    env = ENV_PREFIX + "__".join(str(p).upper() for p in error["loc"] if not isinstance(p, int))
    hint = (
        f" (or {env})" if error["loc"] and not any(isinstance(p, int) for p in error["loc"]) else ""
    )
    value = error.get("input")
    shown = f", got {value!r}" if isinstance(value, str | int | float) and "key" not in key else ""
    return f"{key}{hint}: {error['msg']}{shown}"


def _check_http_url(value: str | None) -> str | None:
    if value is None:
        return None
    if not value.startswith(("http://", "https://")) or len(value) < len("http://x"):
        raise ValueError("must be an http:// or https:// URL")
    return value.rstrip("/")


def _used_twice(names: Iterable[str]) -> list[str]:
    """The names that occur more than once, sorted."""
    counts = Counter(names)
    return sorted(name for name, count in counts.items() if count > 1)
