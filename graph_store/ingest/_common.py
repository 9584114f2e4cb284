"""What every adapter shares: reading files, the parse result, JSON-Schema helpers."""

from __future__ import annotations

import gzip
import io
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from pydantic import JsonValue, ValidationError

from graph_store.errors import InvalidItem
from graph_store.models import JsonSchema, Tool

_PROGRESS_EVERY = 2000

# Type words the catalogs use, folded into JSON Schema's.
_TYPES = {
    "str": "string",
    "string": "string",
    "text": "string",
    "date": "string",
    "time": "string",
    "enum": "string",
    "geopoint": "string",
    "binary": "string",
    "int": "integer",
    "integer": "integer",
    "float": "number",
    "number": "number",
    "double": "number",
    "bool": "boolean",
    "boolean": "boolean",
    "list": "array",
    "array": "array",
    "dict": "object",
    "object": "object",
}


@dataclass
class Parsed:
    """What one file yielded: tools, and an error for every item that was not one."""

    tools: list[Tool] = field(default_factory=list)
    errors: list[InvalidItem] = field(default_factory=list)

    def extend(self, other: Parsed) -> None:
        self.tools += other.tools
        self.errors += other.errors


def json_type(word: object) -> str:
    """JSON Schema's type for a catalog's type word (``STRING``, ``int``, ``DATE (…)``)."""
    if not isinstance(word, str) or not word.strip():
        return "string"
    head = word.strip().split()[0].lower()
    return _TYPES.get(head, "string")


def object_schema(properties: dict[str, JsonSchema], required: list[str]) -> JsonSchema:
    props: dict[str, JsonValue] = dict(properties)
    needed: list[JsonValue] = [name for name in required if name in properties]
    return {"type": "object", "properties": props, "required": needed}


def read_json(path: Path) -> object:
    """A JSON or YAML document; :class:`InvalidItem` naming the line when it is neither."""
    text = _read_text(path)
    if path.suffix in (".yaml", ".yml"):
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f"line {mark.line + 1}" if mark is not None else "document"
            raise InvalidItem(str(path), where, "not valid YAML") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidItem(str(path), f"line {exc.lineno}", f"not valid JSON: {exc.msg}") from None


def read_json_lines(
    path: Path, progress: Callable[[int], None] | None = None
) -> Iterator[tuple[int, object | InvalidItem]]:
    """Each line of a JSON-lines file (gzip when it ends in .gz), or the error it gave.

    ``progress`` hears now and then how many bytes of the file (compressed, for gzip)
    have been read.
    """
    try:
        with path.open("rb") as raw:
            stream = gzip.GzipFile(fileobj=raw) if path.suffix == ".gz" else raw
            lines = io.TextIOWrapper(stream, encoding="utf-8")
            read_one = False
            for number, line in enumerate(lines, 1):
                if progress is not None and number % _PROGRESS_EVERY == 0:
                    progress(raw.tell())
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    problem = InvalidItem(str(path), f"line {number}", f"not JSON: {exc.msg}")
                    if not read_one:  # not a JSON-lines file at all: one error, not one a line
                        raise problem from None
                    yield number, problem
                    continue
                read_one = True
                yield number, row
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidItem(str(path), "file", f"cannot read it: {exc}") from None


def _read_text(path: Path) -> str:
    try:
        if path.suffix == ".gz":
            return gzip.decompress(path.read_bytes()).decode("utf-8")
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidItem(str(path), "file", f"cannot read it: {exc}") from None


def build_tool(parsed: Parsed, file: Path, item: str, values: dict[str, object]) -> None:
    """Validate one tool into ``parsed``, or record why it is not one."""
    try:
        parsed.tools.append(Tool.model_validate(_fit_integers(values)))
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in error['loc']) or 'tool'}: {error['msg']}"
            for error in exc.errors()
        )
        parsed.errors.append(InvalidItem(str(file), item, problems))


def text(value: object) -> str:
    return value.strip() if isinstance(value, str) else ""


_INT64 = 2**63


def _fit_integers(value: object) -> object:
    # Catalog examples hold integers wider than 64 bits, which the stores cannot write.
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and not -_INT64 <= value < _INT64:
        return str(value)
    if isinstance(value, dict):
        return {key: _fit_integers(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_fit_integers(item) for item in value]
    return value
