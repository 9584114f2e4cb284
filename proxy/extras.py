"""The optional dependencies (pyproject.toml's extras) that a deployment's settings need.

An install holds what its deployment serves: ``toolgraph`` alone relays (passthrough)
and selects; ``toolgraph[packs]`` adds the tool packs' libraries (SymPy for the math
pack, SQLAlchemy, sqlglot and psycopg for the database pack, Oxigraph for RDF graphs);
``toolgraph[providers]`` adds litellm, which translates for upstreams that do not speak
OpenAI's API; ``toolgraph[gpu]`` adds FlagEmbedding for ``retriever.model_kind: bge-m3``.
A setting that needs an extra the install lacks stops the start with one line naming the
setting, the extra and the command that installs it, instead of an import error on the
first request that reaches it.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib.util import find_spec
from typing import Literal

from proxy.config import ConfigError, DatabasePackSettings, Settings
from proxy.upstream.routing import ModelRouter

Extra = Literal["packs", "providers", "gpu"]


@dataclass(frozen=True, slots=True)
class Need:
    """``setting`` (as a user writes it) imports ``modules``, which ``extra`` installs."""

    setting: str
    extra: Extra
    modules: tuple[str, ...]

    def missing(self) -> list[str]:
        return [module for module in self.modules if not installed(module)]


def installed(module: str) -> bool:
    """Whether ``module`` can be imported, found without importing it."""
    return find_spec(module) is not None


def needs_of(settings: Settings) -> list[Need]:
    """What the settings import beyond the core install, setting by setting."""
    needs: list[Need] = []
    if settings.orchestrate.builtin_tools:
        needs.append(Need("orchestrate.builtin_tools", "packs", ("sympy",)))
    for database in settings.packs.database:
        needs.append(Need(f"packs.database {database.name}", "packs", _database_modules(database)))
    for graph in settings.packs.knowledge_graph:
        if graph.kind == "rdf":
            needs.append(Need(f"packs.knowledge_graph {graph.name}", "packs", ("pyoxigraph",)))
    for label in ModelRouter(settings).litellm_labels():
        needs.append(Need(f"model {label} (through litellm)", "providers", ("litellm",)))
    if settings.retriever.model_kind == "bge-m3":
        needs.append(Need("retriever.model_kind bge-m3", "gpu", ("FlagEmbedding",)))
    return needs


def _database_modules(database: DatabasePackSettings) -> tuple[str, ...]:
    if database.url.startswith("postgresql"):
        return ("sqlalchemy", "sqlglot", "psycopg")
    return ("sqlalchemy", "sqlglot")


def missing_extras(settings: Settings) -> list[str]:
    """One line per setting whose extra is not installed."""
    return [
        f"{need.setting} needs {', '.join(missing)}, which the [{need.extra}] extra installs: "
        f"pip install 'toolgraph[{need.extra}]'"
        for need in needs_of(settings)
        if (missing := need.missing())
    ]


def check_extras(settings: Settings) -> None:
    """Raise :class:`ConfigError` when a setting needs an extra that is not installed."""
    if problems := missing_extras(settings):
        raise ConfigError("; ".join(problems))
