"""The references that follow the code: the settings table (docs/configuration.md), the
metrics table (docs/operations.md), and the settings the Helm chart's values schema
accepts under ``config``.

The settings come from :class:`proxy.config.Settings` (field names, types, defaults,
descriptions), the metrics from the collectors in :mod:`proxy.metrics`; tests fail
when a file drifts from them.

    python -m proxy.reference                      # print the generated sections
    python -m proxy.reference --write FILE...      # rewrite them in place
    python -m proxy.reference --check FILE...      # exit 1 when any is stale

FILE is a page with ``<!-- settings:start -->`` / ``<!-- metrics:start -->``-style
markers (each section it holds is rewritten between them) or a chart's
``values.schema.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import types
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

from prometheus_client.metrics import MetricWrapperBase
from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from proxy import metrics
from proxy.config import ENV_PREFIX, Settings

SECTIONS = ("settings", "metrics")


@dataclass(frozen=True, slots=True)
class SettingRow:
    key: str
    env: str
    type: str
    default: str
    description: str


def setting_rows() -> list[SettingRow]:
    """One row per setting, nested sections flattened to ``section.key``."""
    return list(_rows(Settings.model_fields, key_prefix="", env_prefix=ENV_PREFIX))


def render_settings() -> str:
    lines = [
        "| key (YAML) | environment variable | type | default | description |",
        "| --- | --- | --- | --- | --- |",
    ]
    lines += [
        f"| `{r.key}` | {r.env} | {r.type} | {r.default} | {_cell(r.description)} |"
        for r in setting_rows()
    ]
    return "\n".join(lines)


def metric_collectors() -> list[MetricWrapperBase]:
    """Every metric :mod:`proxy.metrics` defines, in the order it defines them."""
    return [value for value in vars(metrics).values() if isinstance(value, MetricWrapperBase)]


def exposed_names(metric: MetricWrapperBase) -> list[str]:
    """The sample names the metric shows on ``/metrics``."""
    name, kind = metric._name, metric._type
    if kind == "counter":
        return [f"{name}_total"]
    if kind == "histogram":
        return [f"{name}_bucket", f"{name}_sum", f"{name}_count"]
    if kind == "summary":
        return [f"{name}_sum", f"{name}_count"]
    return [name]


def render_metrics() -> str:
    lines = ["| metric | type | labels | meaning |", "| --- | --- | --- | --- |"]
    for metric in metric_collectors():
        name = exposed_names(metric)[0].removesuffix("_bucket")
        labels = ", ".join(f"`{label}`" for label in metric._labelnames)
        lines.append(f"| `{name}` | {metric._type} | {labels} | {_cell(metric._documentation)} |")
    return "\n".join(lines)


def render(section: str) -> str:
    return {"settings": render_settings, "metrics": render_metrics}[section]()


def update_text(text: str) -> str:
    """``text`` with each generated section whose markers it holds replaced."""
    replaced = 0
    for section in SECTIONS:
        start, end = _markers(section)
        head, found, rest = text.partition(start)
        if not found:
            continue
        _, found_end, tail = rest.partition(end)
        if not found_end:
            raise ValueError(f"marker {start} without its {end}")
        text = f"{head}{start}\n{render(section)}\n{end}{tail}"
        replaced += 1
    if not replaced:
        markers = " or ".join(_markers(section)[0] for section in SECTIONS)
        raise ValueError(f"no generated section: {markers} not found")
    return text


def update_values_schema(text: str) -> str:
    """A chart's values.schema.json whose ``config`` accepts exactly the settings."""
    schema = json.loads(text)
    schema["properties"]["config"]["properties"] = {
        name: {"description": field.description or name}
        for name, field in Settings.model_fields.items()
    }
    return json.dumps(schema, indent=2) + "\n"


def update_file(path: Path, text: str) -> str:
    return update_values_schema(text) if path.suffix == ".json" else update_text(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m proxy.reference",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--write", type=Path, nargs="+", metavar="FILE", help="rewrite them")
    action.add_argument("--check", type=Path, nargs="+", metavar="FILE", help="exit 1 if stale")
    args = parser.parse_args(argv)
    if args.write is None and args.check is None:
        for section in SECTIONS:
            print(f"{_markers(section)[0]}\n{render(section)}\n{_markers(section)[1]}")
        return 0
    stale = 0
    for path in args.write or args.check:
        current = path.read_text(encoding="utf-8")
        updated = update_file(path, current)
        if args.write is not None:
            path.write_text(updated, encoding="utf-8")
        elif updated != current:
            print(f"{path}: stale; run python -m proxy.reference --write {path}")
            stale = 1
    return stale


def _markers(section: str) -> tuple[str, str]:
    return f"<!-- {section}:start -->", f"<!-- {section}:end -->"


def _rows(fields: dict[str, FieldInfo], key_prefix: str, env_prefix: str) -> Iterator[SettingRow]:
    for name, field in fields.items():
        key, env = f"{key_prefix}{name}", f"{env_prefix}{name.upper()}"
        section = _model_of(field.annotation)
        if section is not None:
            yield from _rows(section.model_fields, f"{key}.", f"{env}__")
            continue
        item = _list_item_model(field.annotation)
        # pydantic-settings reads lists and mappings from the environment as JSON.
        json_valued = get_origin(field.annotation) in (list, dict)
        env_cell = "—" if not env_prefix else f"`{env}` (JSON)" if json_valued else f"`{env}`"
        # a section class is ``<Name>Settings``; a user writes entries of a <Name>
        type_name = (
            f"list of {item.__name__.removesuffix('Settings')}"
            if item
            else _type_name(field.annotation)
        )
        description = field.description or ""
        yield SettingRow(key, env_cell, type_name, _default(field), description)
        if item is not None:
            yield from _rows(item.model_fields, f"{key}[].", "")


def _model_of(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


def _list_item_model(annotation: Any) -> type[BaseModel] | None:
    if get_origin(annotation) is list:
        return _model_of(get_args(annotation)[0])
    return None


_TYPE_NAMES: dict[Any, str] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    Path: "path",
    SecretStr: "secret string",
}


def _type_name(annotation: Any) -> str:
    origin = get_origin(annotation)
    if origin is Literal:
        return " \\| ".join(f"`{value}`" for value in get_args(annotation))
    if origin in (Union, types.UnionType):
        args = [arg for arg in get_args(annotation) if arg is not type(None)]
        return " \\| ".join(_type_name(arg) for arg in args)
    if origin is list:
        return f"list of {_type_name(get_args(annotation)[0])}"
    return _TYPE_NAMES.get(annotation, getattr(annotation, "__name__", str(annotation)))


def _default(field: FieldInfo) -> str:
    if field.is_required():
        return "required"
    if field.default is PydanticUndefined and field.default_factory is not None:
        value = field.get_default(call_default_factory=True)
    else:
        value = field.default
    if value is None:
        return "unset"
    if isinstance(value, list | tuple) and not value:
        return "`[]`"
    if isinstance(value, BaseModel):
        return "see below"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if value == "":
        return '`""`'
    if isinstance(value, Path):
        home = str(Path.home())
        shown = str(value)
        return f"`~{shown.removeprefix(home)}`" if shown.startswith(home) else f"`{shown}`"
    return f"`{value}`"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


if __name__ == "__main__":
    sys.exit(main())
