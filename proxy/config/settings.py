"""The one settings object, its sections and where its values come from."""

from __future__ import annotations

from contextvars import ContextVar
from pathlib import Path
from typing import Any, Literal
from urllib.parse import unquote, urlsplit

from pydantic import (
    Field,
    SecretStr,
    field_validator,
)
from pydantic_settings import (
    BaseSettings,
    InitSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from proxy.config.base import (
    ENV_PREFIX,
    check_http_url,
    used_twice,
)
from proxy.config.engine import (
    ExecutorSettings,
    LearningSettings,
    OrchestrateSettings,
    PlannerSettings,
)
from proxy.config.serving import (
    LimitsSettings,
    ModelRouteSettings,
    ResponsesSettings,
    RetrieverSettings,
    TimeoutsSettings,
)
from proxy.config.sources import (
    McpServerSettings,
    PacksSettings,
)

config_file_data: ContextVar[dict[str, Any] | None] = ContextVar(
    "toolgraph_config_file", default=None
)


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
    worker_start_timeout: float = Field(
        default=120.0,
        gt=0,
        description="With several workers: seconds uvicorn's supervisor waits for a worker to "
        "answer its health check (and a new one to be ready) before it kills and replaces it; "
        "a worker still loading on a busy host or a CPU-limited pod must not be killed for it.",
    )
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
    allowed_hosts: list[str] | None = Field(
        default=None,
        description="`Host` names toolgraph answers to (a guard against DNS rebinding); "
        "others are refused with a 403. Unset: `localhost`, `127.0.0.1` and `::1` when it "
        "listens on loopback without a master key, any host otherwise.",
    )
    allowed_origins: list[str] = Field(
        default_factory=list,
        description="Web origins (`https://app.example`) whose pages may call a proxy without "
        "a master key from a browser; any other cross-site request to one is refused.",
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
        return check_http_url(value)

    neo4j_uri: str | None = Field(
        default=None, description="Neo4j Bolt URI; the in-process graph under data_dir if unset."
    )
    default_mode: Literal["passthrough", "select", "orchestrate"] = Field(
        default="passthrough",
        description="Mode of a request that names none (`toolgraph.mode` or `x-toolgraph-mode`); "
        "a request with tools or tool results of its own is never orchestrated by default.",
    )
    models: list[ModelRouteSettings] = Field(default_factory=list, description="The routing table.")
    limits: LimitsSettings = Field(default_factory=LimitsSettings)
    timeouts: TimeoutsSettings = Field(default_factory=TimeoutsSettings)
    retriever: RetrieverSettings = Field(default_factory=RetrieverSettings)
    executor: ExecutorSettings = Field(default_factory=ExecutorSettings)
    planner: PlannerSettings = Field(default_factory=PlannerSettings)
    orchestrate: OrchestrateSettings = Field(default_factory=OrchestrateSettings)
    learning: LearningSettings = Field(default_factory=LearningSettings)
    responses: ResponsesSettings = Field(default_factory=ResponsesSettings)
    packs: PacksSettings = Field(default_factory=PacksSettings)
    mcp_servers: list[McpServerSettings] = Field(
        default_factory=list,
        description="MCP servers whose tools join the catalog (stdio `{name, command, env, cwd}` "
        "or streamable HTTP `{name, url, headers}`); run in orchestrate mode through `tools/call`.",
    )
    mcp_registry_commands: bool = Field(
        default=False,
        description="Whether stdio MCP servers added through the registry API (admin key), each "
        "a command run on this host, may be added and started; off, only HTTP servers are, "
        "and a stdio server in the kept list is skipped with a warning.",
    )
    mcp_header_env: list[str] = Field(
        default_factory=list,
        description="Environment variables whose values a header of an MCP server added through "
        "the registry API may send (`env:NAME`); none by default. The settings file's servers "
        "may name any.",
    )

    @field_validator("upstream_base_url")
    @classmethod
    def _check_upstream(cls, value: str) -> str:
        checked = check_http_url(value)
        assert checked is not None
        return checked

    @field_validator("models")
    @classmethod
    def _check_routes(cls, routes: list[ModelRouteSettings]) -> list[ModelRouteSettings]:
        seen: set[str] = set()
        for route in routes:
            if route.name in seen:
                raise ValueError(f"model {route.name!r} is routed twice")
            seen.add(route.name)
        return routes

    @field_validator("mcp_servers")
    @classmethod
    def _check_mcp_names(cls, servers: list[McpServerSettings]) -> list[McpServerSettings]:
        if twice := used_twice(server.name for server in servers):
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
        return (
            init_settings,
            env_settings,
            InitSettingsSource(settings_cls, config_file_data.get() or {}),
        )
