"""The generated settings and metrics references (docs/) match the code."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from proxy import reference
from proxy.config import ConfigError, Settings, load_settings

ROOT = Path(__file__).resolve().parents[2]
CONFIGURATION = ROOT / "docs" / "configuration.md"
OPERATIONS = ROOT / "docs" / "operations.md"
VALUES_SCHEMA = ROOT / "helm" / "toolgraph" / "values.schema.json"
REGENERATE = (
    "run: python -m proxy.reference --write docs/configuration.md docs/operations.md "
    "helm/toolgraph/values.schema.json"
)


def section(page: Path, name: str) -> str:
    text = page.read_text()
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    assert text.count(start) == 1, f"{page.name} needs one {start}"
    return text.split(start, 1)[1].split(end, 1)[0].strip()


def test_the_settings_reference_is_current() -> None:
    assert section(CONFIGURATION, "settings") == reference.render_settings(), REGENERATE


def test_the_metrics_reference_is_current() -> None:
    assert section(OPERATIONS, "metrics") == reference.render_metrics(), REGENERATE


def test_the_charts_values_schema_accepts_the_current_settings() -> None:
    current = VALUES_SCHEMA.read_text()
    assert reference.update_values_schema(current) == current, REGENERATE


def test_each_reference_sits_in_its_own_page() -> None:
    configuration, operations = CONFIGURATION.read_text(), OPERATIONS.read_text()
    assert "<!-- metrics:start -->" not in configuration
    assert "<!-- settings:start -->" not in operations
    assert configuration.index("<!-- settings:start -->") > configuration.index(
        "\n## Configuration reference\n"
    )
    assert operations.index("<!-- metrics:start -->") > operations.index("\n## Metrics reference\n")


def test_every_setting_has_a_row() -> None:
    keys = {row.key for row in reference.setting_rows()}
    for name, field in Settings.model_fields.items():
        nested = getattr(field.annotation, "model_fields", None)
        if nested is None:
            assert name in keys
        else:
            assert {f"{name}.{sub}" for sub in nested} <= keys


def test_every_listed_variable_is_one_toolgraph_accepts(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = [row for row in reference.setting_rows() if row.env.startswith("`")]
    names = [re.sub(r"`([^`]+)`.*", r"\1", row.env) for row in rows]
    assert "TOOLGRAPH_LIMITS__MAX_BODY_BYTES" in names
    for name, row in zip(names, rows, strict=True):
        # JSON-valued variables are parsed before validation; give them valid JSON.
        monkeypatch.setenv(name, "[]" if "(JSON)" in row.env else "not a valid value")
    monkeypatch.setenv("TOOLGRAPH_NO_SUCH_SETTING", "1")
    with pytest.raises(ConfigError) as raised:
        load_settings()
    unknown = re.findall(r"(TOOLGRAPH_\w+): unknown setting", str(raised.value))
    assert unknown == ["TOOLGRAPH_NO_SUCH_SETTING"]


def test_check_reports_a_stale_readme(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stale = tmp_path / "README.md"
    stale.write_text(
        "# x\n<!-- settings:start -->\nold\n<!-- settings:end -->\n"
        "<!-- metrics:start -->\n<!-- metrics:end -->\n"
    )
    assert reference.main(["--check", str(stale)]) == 1
    assert "stale" in capsys.readouterr().out
    assert reference.main(["--write", str(stale)]) == 0
    assert reference.main(["--check", str(stale)]) == 0
    assert stale.read_text().startswith("# x\n<!-- settings:start -->\n| key (YAML)")


def test_a_page_gets_only_the_sections_it_marks(tmp_path: Path) -> None:
    page = tmp_path / "operations.md"
    page.write_text("# Ops\n<!-- metrics:start -->\nold\n<!-- metrics:end -->\ntail\n")
    assert reference.main(["--write", str(page)]) == 0
    text = page.read_text()
    assert "<!-- settings:start -->" not in text
    assert text.endswith("<!-- metrics:end -->\ntail\n")
    assert section(page, "metrics") == reference.render_metrics()
    page.write_text("# no markers\n")
    with pytest.raises(ValueError, match="no generated section"):
        reference.main(["--write", str(page)])


def test_write_brings_a_values_schema_up_to_date(tmp_path: Path) -> None:
    schema = json.loads(VALUES_SCHEMA.read_text())
    schema["properties"]["config"]["properties"] = {"removed_setting": {}}
    stale = tmp_path / "values.schema.json"
    stale.write_text(json.dumps(schema))
    assert reference.main(["--check", str(stale)]) == 1
    assert reference.main(["--write", str(stale)]) == 0
    properties = json.loads(stale.read_text())["properties"]["config"]["properties"]
    assert set(properties) == set(Settings.model_fields)


def test_defaults_are_shown_as_the_model_has_them() -> None:
    rows = {row.key: row for row in reference.setting_rows()}
    assert rows["port"].default == "`8000`"
    assert rows["redis_url"].default == "unset"
    assert rows["data_dir"].default == "`~/.local/share/toolgraph`"
    assert rows["models[].name"].default == "required"
    assert rows["log_level"].type == "`debug` \\| `info` \\| `warning` \\| `error`"
