"""The test tiers (`make test-quick` leaves out the marked tests) name real files, real
fixtures and registered markers: a renamed file would otherwise fall into the quick tier
unnoticed."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests import conftest as tiers
from tests.conftest import (
    EXTRAS,
    FILES_BY_EXTRA,
    TIER_BY_FIXTURE,
    TIER_BY_PARAM,
    TIER_BY_PATH,
    mark_tiers,
    measured_slow,
)

ROOT = Path(__file__).resolve().parent.parent


def registered_markers() -> set[str]:
    options = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]
    return {line.split(":")[0] for line in options["ini_options"]["markers"]}


def test_every_tier_is_a_registered_marker() -> None:
    tiers = set(TIER_BY_PATH.values()) | set(TIER_BY_FIXTURE.values()) | set(TIER_BY_PARAM.values())
    assert tiers == {"slow", "browser", "deploy", "training"}
    assert tiers <= registered_markers()


def test_every_marked_path_exists() -> None:
    missing = [prefix for prefix in TIER_BY_PATH if not (ROOT / prefix).exists()]
    assert missing == []


def test_every_marking_fixture_exists() -> None:
    defined = "\n".join(path.read_text() for path in (ROOT / "tests").rglob("conftest.py"))
    missing = [name for name in TIER_BY_FIXTURE if f"def {name}(" not in defined]
    assert missing == []


def test_every_marking_parameter_is_a_parameter_of_the_tests() -> None:
    sources = "\n".join(path.read_text() for path in (ROOT / "tests").rglob("*.py"))
    missing = [value for value in TIER_BY_PARAM if f'"{value}"' not in sources]
    assert missing == []


@dataclass
class Item:
    """What the tiers read of a collected test."""

    path: Path
    fixturenames: list[str]
    callspec: SimpleNamespace | None = None
    nodeid: str = ""
    markers: list[str] = field(default_factory=list)

    def add_marker(self, name: str) -> None:
        self.markers.append(name)


def test_a_test_is_marked_by_its_path_its_fixtures_and_its_parameters(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tests = ROOT / "tests"
    items = [
        Item(tests / "mcp" / "test_sources.py", []),
        Item(
            tests / "graph_store" / "test_store.py",
            ["store"],
            SimpleNamespace(params={"store": "neo4j"}),
        ),
        Item(
            tests / "graph_store" / "test_store.py",
            ["store"],
            SimpleNamespace(params={"store": "in_process"}),
        ),
        Item(tests / "console" / "test_pages.py", ["chromium"]),
        Item(tests / "proxy" / "test_body.py", ["upstream"]),
        Item(tests / "proxy" / "test_kv.py", [], nodeid="tests/proxy/test_kv.py::test_x[a]"),
    ]
    monkeypatch.setattr(
        tiers, "measured_slow", lambda: frozenset({"tests/proxy/test_kv.py::test_x"})
    )
    mark_tiers(items)  # type: ignore[arg-type]
    marks = [item.markers for item in items]
    assert marks == [["slow"], ["slow"], [], ["browser"], [], ["slow"]]


def test_every_measured_slow_test_exists() -> None:
    missing = []
    for node in measured_slow():
        path, *names = node.split("::")
        source = ROOT / path
        if not source.exists() or f"def {names[-1]}(" not in source.read_text():
            missing.append(node)
    assert missing == []


def test_every_file_left_out_without_an_extra_exists_and_names_an_extra() -> None:
    missing = [
        f for files in FILES_BY_EXTRA.values() for f in files if not (ROOT / "tests" / f).exists()
    ]
    assert missing == []
    assert set(FILES_BY_EXTRA) <= set(EXTRAS)


def test_every_extra_marker_names_a_known_extra() -> None:
    sources = "\n".join(path.read_text() for path in (ROOT / "tests").rglob("test_*.py"))
    named = set(re.findall(r'mark\.extra\("(\w+)"\)', sources))
    assert named
    assert named <= set(EXTRAS)
