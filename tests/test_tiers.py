"""The test tiers (`make test-quick` leaves out the marked tests) name real files, real
fixtures and registered markers: a renamed file would otherwise fall into the quick tier
unnoticed."""

from __future__ import annotations

import tomllib
from pathlib import Path

from tests.conftest import TIER_BY_FIXTURE, TIER_BY_PATH

ROOT = Path(__file__).resolve().parent.parent


def registered_markers() -> set[str]:
    options = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]
    return {line.split(":")[0] for line in options["ini_options"]["markers"]}


def test_every_tier_is_a_registered_marker() -> None:
    tiers = set(TIER_BY_PATH.values()) | set(TIER_BY_FIXTURE.values())
    assert tiers == {"slow", "browser", "deploy", "training"}
    assert tiers <= registered_markers()


def test_every_marked_path_exists() -> None:
    missing = [prefix for prefix in TIER_BY_PATH if not (ROOT / prefix).exists()]
    assert missing == []


def test_every_marking_fixture_exists() -> None:
    defined = "\n".join(path.read_text() for path in (ROOT / "tests").rglob("conftest.py"))
    missing = [name for name in TIER_BY_FIXTURE if f"def {name}(" not in defined]
    assert missing == []
