"""The geography graph behind each backend, opened through the pack as a user would
configure it: ``path: demo`` (embedded Oxigraph), a SPARQL endpoint URL (a real
``oxigraph serve``), and the Bolt server the graph tests already use (ArcadeDB)."""

from __future__ import annotations

import shutil
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from proxy.config import KnowledgeGraphPackSettings
from proxy.tools.packs.knowledge_graph.catalog import KnowledgeGraphPack
from proxy.tools.variables import Variables, bound_variables
from tests.conftest import unavailable
from tests.tools.knowledge_graph.geography import GEO, OxigraphServer, load_bolt

BACKENDS = ("embedded", "endpoint", "bolt")


@pytest.fixture(scope="session")
def sparql_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OxigraphServer]:
    binary = shutil.which("oxigraph") or str(Path(sys.executable).parent / "oxigraph")
    if not Path(binary).exists():
        unavailable("the oxigraph server is not installed (pip install oxigraph)")
    server = OxigraphServer(tmp_path_factory.mktemp("oxigraph"))
    server.start(binary)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def geo_bolt(bolt_uri: str) -> str:
    load_bolt(bolt_uri)
    return bolt_uri


def settings_for(
    backend: str, request: pytest.FixtureRequest, **extra: Any
) -> KnowledgeGraphPackSettings:
    if backend == "embedded":
        return KnowledgeGraphPackSettings(name="geo", path=Path("demo"), **extra)
    if backend == "endpoint":
        server: OxigraphServer = request.getfixturevalue("sparql_server")
        return KnowledgeGraphPackSettings(name="geo", url=server.url, **extra)
    uri: str = request.getfixturevalue("geo_bolt")
    return KnowledgeGraphPackSettings(name="geo", kind="bolt", url=uri, **extra)


@dataclass
class Geo:
    """The pack over one backend, calls sharing one request's variables."""

    pack: KnowledgeGraphPack
    backend: str
    variables: Variables
    bolt_uri: str = ""

    async def call(self, tool: str, **arguments: Any) -> Any:
        with bound_variables(self.variables):
            return await self.pack.functions()[f"geo_{tool}"](arguments)

    def relation(self, name: str) -> str:
        """A relation as this backend names it (``^`` kept in front)."""
        back = name.startswith("^")
        bare = name.removeprefix("^")
        return ("^" if back else "") + (bare if self.backend == "bolt" else GEO + bare)

    def attribute(self, name: str) -> str:
        return name if self.backend == "bolt" else GEO + name

    async def names(self, answer: dict[str, Any]) -> set[str]:
        return {entity["name"] for entity in answer["entities"]}


@pytest.fixture(params=BACKENDS)
async def geo(request: pytest.FixtureRequest) -> AsyncIterator[Geo]:
    settings = settings_for(request.param, request)
    pack = KnowledgeGraphPack.open([settings])
    yield Geo(
        pack, request.param, Variables(), (settings.url or "") if request.param == "bolt" else ""
    )
    await pack.aclose()
