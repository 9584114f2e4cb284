"""The sections that add tools: MCP servers and the database and knowledge-graph packs."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal
from urllib.parse import unquote, urlsplit

from pydantic import (
    Field,
    field_validator,
    model_validator,
)

from proxy.config.base import (
    Section,
    check_http_url,
    used_twice,
)


class McpServerSettings(Section):
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
        return check_http_url(value)

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerSettings:
        if bool(self.command) == (self.url is not None):
            raise ValueError("an MCP server needs exactly one of command (stdio) or url (HTTP)")
        return self

    def header_values(self) -> dict[str, str]:
        """The headers with every `env:NAME` value read from the environment (missing: empty)."""
        return {
            key: os.environ.get(value[4:], "") if value.startswith("env:") else value
            for key, value in self.headers.items()
        }


class DatabasePackSettings(Section):
    """One database the database pack navigates (proxy/tools/packs/database); its tools are
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
    max_sql_chars: int = Field(
        default=20_000,
        gt=0,
        description="Characters of model-written SQL the pack parses; longer SQL is refused "
        "before it is parsed.",
    )
    max_cell_bytes: int = Field(
        default=1_048_576,
        ge=1024,
        description="Bytes one value a query makes may hold (SQLite refuses to build a longer "
        "string or blob; on PostgreSQL a row holding one is refused once fetched).",
    )
    max_answer_bytes: int = Field(
        default=1_048_576,
        ge=1024,
        description="Bytes of rows one call fetches: rows stop there, and the answer says it "
        "was truncated.",
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


class KnowledgeGraphPackSettings(Section):
    """One graph the knowledge-graph pack navigates (proxy/tools/packs/knowledge_graph); its
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
    def _check_source(self) -> KnowledgeGraphPackSettings:
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


class PacksSettings(Section):
    """Tool packs built from settings, beside the built-in math pack."""

    database: list[DatabasePackSettings] = Field(
        default_factory=list, description="Databases the database pack navigates, read-only."
    )
    knowledge_graph: list[KnowledgeGraphPackSettings] = Field(
        default_factory=list,
        description="Graphs the knowledge-graph pack navigates, read-only (RDF or Bolt).",
    )

    @field_validator("database")
    @classmethod
    def _unique(cls, databases: list[DatabasePackSettings]) -> list[DatabasePackSettings]:
        if twice := used_twice(database.name for database in databases):
            raise ValueError(f"database names used twice: {', '.join(twice)}")
        return databases

    @field_validator("knowledge_graph")
    @classmethod
    def _unique_graphs(
        cls, graphs: list[KnowledgeGraphPackSettings]
    ) -> list[KnowledgeGraphPackSettings]:
        if twice := used_twice(graph.name for graph in graphs):
            raise ValueError(f"knowledge graph names used twice: {', '.join(twice)}")
        return graphs
