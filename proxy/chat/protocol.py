"""The wire model of a chat completion request, as far as toolgraph checks it.

Only what toolgraph must understand is typed; every model accepts unknown fields,
and the request goes upstream as the client sent it, not as re-dumped from here.
Types are strict, as OpenAI's are: ``"stream": "yes"`` is an error, not ``True``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError
from pydantic_core import ErrorDetails

from proxy.errors import InvalidRequest


class _Wire(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)


class FunctionCall(_Wire):
    name: str
    arguments: str


class ToolCall(_Wire):
    id: str
    type: str = "function"
    function: FunctionCall | None = None


class Message(_Wire):
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[dict[str, Any]] | None = None
    name: str | None = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None


class FunctionDefinition(_Wire):
    name: str = Field(min_length=1)
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class Tool(_Wire):
    type: str
    function: FunctionDefinition | None = None


class StreamOptions(_Wire):
    include_usage: bool | None = None


class ToolgraphOptions(BaseModel):
    """The request's own ``toolgraph`` field (the SDK's ``extra_body``); never sent upstream."""

    model_config = ConfigDict(extra="forbid", strict=True)

    mode: Literal["passthrough", "select", "orchestrate"] | None = None
    progress: bool | None = None
    top_k: int | None = Field(default=None, ge=1, le=512)
    threshold: float | None = Field(default=None, ge=-1, le=1)
    gate: bool | None = None  # select mode: forward no tools when the no-tool gate says so


class ChatCompletionRequest(_Wire):
    model: str = Field(min_length=1)
    messages: list[Message] = Field(min_length=1)
    stream: bool | None = None
    stream_options: StreamOptions | None = None
    tools: list[Tool] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    response_format: dict[str, Any] | None = None
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, ge=0, le=1)
    n: int | None = Field(default=None, ge=1, le=128)
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    toolgraph: ToolgraphOptions | None = None


def parse_request(body: object, batched: bool = False) -> ChatCompletionRequest:
    """Validate a decoded body, or raise :class:`InvalidRequest` naming the first bad field.

    ``batched`` validates long ``messages`` and ``tools`` lists a batch at a time, so that
    a worker thread gives the GIL back between batches: pydantic holds it for one whole
    call (8,192 tools: 40 ms).
    """
    if not isinstance(body, dict):
        raise InvalidRequest("the request body must be a JSON object", code="invalid_type")
    if batched:
        body = {**body, **{key: _in_batches(body[key], key) for key in _LISTS if _long(body, key)}}
    try:
        return ChatCompletionRequest.model_validate(body)
    except ValidationError as exc:
        raise _invalid(exc.errors()[0], ()) from None


_BATCH = 256
_LISTS: dict[str, TypeAdapter[Any]] = {
    "messages": TypeAdapter(list[Message]),
    "tools": TypeAdapter(list[Tool]),
}


def _long(body: dict[str, Any], key: str) -> bool:
    items = body.get(key)
    return isinstance(items, list) and len(items) > _BATCH


def _in_batches(items: list[Any], key: str) -> list[Any]:
    validated: list[Any] = []
    for start in range(0, len(items), _BATCH):
        try:
            validated += _LISTS[key].validate_python(items[start : start + _BATCH])
        except ValidationError as exc:
            error = exc.errors()[0]
            index = error["loc"][0]
            assert isinstance(index, int)
            raise _invalid(error, (key, start + index), skip=1) from None
    return validated


def _invalid(error: ErrorDetails, prefix: tuple[int | str, ...], skip: int = 0) -> InvalidRequest:
    param = format_param((*prefix, *error["loc"][skip:]))
    message = error["msg"]
    if error["type"] == "missing":
        message = f"Missing required parameter: '{param}'."
    elif param:
        message = f"Invalid value for '{param}': {message}."
    return InvalidRequest(message, param=param or None, code=_code(error["type"]))


def format_param(loc: tuple[int | str, ...]) -> str:
    """A pydantic location in OpenAI's spelling: ``messages.[0].role``."""
    return ".".join(f"[{part}]" if isinstance(part, int) else part for part in _trim(loc))


def _trim(loc: tuple[int | str, ...]) -> list[int | str]:
    # Union members show up as extra parts ("str", "list[dict[str,any]]"): they name a
    # type the value failed to be, not a field, so they are dropped.
    return [part for part in loc if not _is_type_tag(part)]


def _is_type_tag(part: int | str) -> bool:
    return isinstance(part, str) and (part in _TYPE_NAMES or "[" in part)


_TYPE_NAMES = frozenset({"str", "int", "float", "bool", "dict", "list", "none"})


def _code(error_type: str) -> str:
    if error_type == "missing":
        return "missing_required_parameter"
    if error_type.endswith("_type") or error_type.endswith("_parsing"):
        return "invalid_type"
    return "invalid_value"
