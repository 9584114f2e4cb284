"""Chat completions on the wire: the request, the answer, the stream's chunks.

In the order of OpenAI's reference: the request and its parts (checked strictly, as
far as toolgraph must understand them), then the ``chat.completion`` answer with its
usage, then the ``chat.completion.chunk`` of a stream with its delta. Every model keeps
unknown fields (see :mod:`proxy.protocol.base`). A passthrough request goes upstream
as the client sent it, not as re-dumped from here; toolgraph's own answers are built
from these models and written once, by :func:`~proxy.protocol.base.dump_json`.

A second API (the Responses API) is a second module beside this one and a
translation to and from these models, not a second copy of the modes.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from proxy import json_codec
from proxy.errors import InvalidRequest, UpstreamError
from proxy.protocol.base import WireReply, invalid_request
from proxy.protocol.base import WireRequest as _Wire

Mode = Literal["passthrough", "select", "orchestrate"]

# --- the request ---------------------------------------------------------------------


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

    mode: Mode | None = None
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

    def resolve_mode(self, default: Mode) -> Mode:
        """The request's own mode, else the configured ``default`` where it fits.

        A request that brings tools or tool results of its own runs them itself: the
        configured default never orchestrates it, and never selects without tools.
        Decided once, at the door (the router), and kept in the request's context.
        """
        return resolve_mode(self.toolgraph, bool(self.tools), self._has_tool_results(), default)

    def _has_tool_results(self) -> bool:
        return any(message.role in ("tool", "function") for message in self.messages)


def resolve_mode(
    options: ToolgraphOptions | None, tools: bool, tool_results: bool, default: Mode
) -> Mode:
    """A request's mode from its ``toolgraph`` options and whether it brings ``tools`` or
    ``tool_results`` of its own: the one rule of every API (chat, Responses)."""
    if options is not None and options.mode is not None:
        return options.mode
    if default == "orchestrate" and (tools or tool_results):
        return "passthrough"
    if default == "select" and not tools:
        return "passthrough"
    return default


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
        raise invalid_request(exc.errors()[0]) from None


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
            raise invalid_request(error, (key, start + index), skip=1) from None
    return validated


# --- the answer: chat.completion -------------------------------------------------------


class CompletionUsage(WireReply):
    """Tokens of a request (orchestrate mode: the sum of all its upstream calls)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0


class Function(WireReply):
    name: str = ""
    arguments: str = ""


class ChatCompletionMessageToolCall(WireReply):
    id: str = ""
    type: str = "function"
    function: Function | None = None


class ChatCompletionMessage(WireReply):
    role: str = "assistant"
    content: str | None = None
    refusal: str | None = None
    tool_calls: list[ChatCompletionMessageToolCall] | None = None


class Choice(WireReply):
    index: int = 0
    message: ChatCompletionMessage = Field(default_factory=ChatCompletionMessage)
    logprobs: dict[str, Any] | None = None
    finish_reason: str | None = None


class ChatCompletion(WireReply):
    id: str = ""
    object: str = "chat.completion"
    created: int = 0
    model: str = ""
    choices: list[Choice]
    usage: CompletionUsage | None = None
    service_tier: str | None = None
    system_fingerprint: str | None = None

    def text(self) -> str:
        """The first choice's content, or "" when it has none."""
        content = self.choices[0].message.content if self.choices else None
        return content or ""


# --- the stream: chat.completion.chunk ---------------------------------------------------


class ChoiceDeltaToolCallFunction(WireReply):
    name: str | None = None
    arguments: str | None = None


class ChoiceDeltaToolCall(WireReply):
    index: int = 0
    id: str | None = None
    type: str | None = None
    function: ChoiceDeltaToolCallFunction | None = None


class ChoiceDelta(WireReply):
    """A piece of the message; ``reasoning_content`` is where reasoning models (and
    toolgraph's progress) stream their thinking."""

    role: str | None = None
    content: str | None = None
    reasoning_content: str | None = None
    refusal: str | None = None
    tool_calls: list[ChoiceDeltaToolCall] | None = None


class ChunkChoice(WireReply):
    index: int = 0
    delta: ChoiceDelta = Field(default_factory=ChoiceDelta)
    logprobs: dict[str, Any] | None = None
    finish_reason: str | None = None


class ChatCompletionChunk(WireReply):
    id: str = ""
    object: str = "chat.completion.chunk"
    created: int = 0
    model: str = ""
    choices: list[ChunkChoice] = Field(default_factory=list)
    usage: CompletionUsage | None = None
    service_tier: str | None = None
    system_fingerprint: str | None = None

    def text(self) -> str:
        """The content this chunk adds, or ""."""
        for choice in self.choices:
            if choice.delta.content:
                return choice.delta.content
        return ""


def read_completion(content: bytes) -> ChatCompletion:
    """An upstream's whole answer, or :class:`UpstreamError` when it is not one."""
    try:
        payload = json_codec.loads(content)
        if isinstance(payload, dict) and isinstance(payload.get("choices"), list):
            return ChatCompletion.model_validate(payload)
    except (json_codec.DecodeError, ValidationError):
        pass
    raise UpstreamError("the upstream's answer was not a chat completion")


def read_chunk(payload: dict[str, Any]) -> ChatCompletionChunk:
    """One decoded event of an upstream's stream, or :class:`UpstreamError`."""
    try:
        return ChatCompletionChunk.model_validate(payload)
    except ValidationError:
        raise UpstreamError("the upstream's stream sent an event that is not a chunk") from None
