"""The Responses API on the wire: the request and its input items, the ``response``
object with its output items and usage, and the typed events of its stream.

In the order of OpenAI's reference, as :mod:`proxy.protocol.chat` is for chat
completions. Every model keeps unknown fields (see :mod:`proxy.protocol.base`). The
modes never see these shapes: :mod:`proxy.responses_api.translation` turns a request into
a chat completion request and the answer (whole or streamed) back into these.

Only the parts toolgraph translates are typed strictly: message, ``function_call``,
``function_call_output`` and ``reasoning`` input items, function tools and a hosted
``tool_search`` over deferred ones (the search's items in the output). An upstream
that speaks the Responses API itself is relayed the request as the client sent it.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, Tag, ValidationError
from pydantic_core import ErrorDetails

from proxy.errors import InvalidRequest
from proxy.protocol.base import WireReply, invalid_request
from proxy.protocol.base import WireRequest as _Wire
from proxy.protocol.chat import Mode, ToolgraphOptions, resolve_mode
from proxy.protocol.relayed import Endpoint, RelayedRequest

# --- the request -----------------------------------------------------------------------

ITEM_TYPES = (
    "message",
    "function_call",
    "function_call_output",
    "reasoning",
    "tool_search_call",
    "tool_search_output",
)


class InputMessage(_Wire):
    """A message; ``type`` may be left out (the SDK's ``EasyInputMessage``)."""

    type: Literal["message"] = "message"
    role: Literal["user", "assistant", "system", "developer"]
    content: str | list[dict[str, Any]]
    id: str | None = None
    status: str | None = None


class FunctionCallItem(_Wire):
    """A call the model made earlier, sent back with the conversation."""

    type: Literal["function_call"]
    call_id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    arguments: str
    id: str | None = None
    status: str | None = None


class FunctionCallOutputItem(_Wire):
    """The result of a function call, for the call with the same ``call_id``."""

    type: Literal["function_call_output"]
    call_id: str = Field(min_length=1)
    output: str | list[dict[str, Any]]
    id: str | None = None
    status: str | None = None


class ReasoningInputItem(_Wire):
    """A reasoning item sent back; a chat completions upstream has no place for it."""

    type: Literal["reasoning"]
    summary: list[dict[str, Any]] = Field(default_factory=list)
    id: str | None = None


class ToolSearchInputItem(_Wire):
    """A hosted tool search's call or output sent back with the conversation: the chat
    upstream has no place for it, and the next turn's search (select mode over the same
    conversation) loads the tools again, the ones loaded before kept in place."""

    type: Literal["tool_search_call", "tool_search_output"]
    id: str | None = None
    call_id: str | None = None


def _item_type(value: Any) -> str | None:
    if isinstance(value, dict):
        kind = value.get("type", "message")
        return kind if isinstance(kind, str) else None
    return getattr(value, "type", None)


InputItem = Annotated[
    Annotated[InputMessage, Tag("message")]
    | Annotated[FunctionCallItem, Tag("function_call")]
    | Annotated[FunctionCallOutputItem, Tag("function_call_output")]
    | Annotated[ReasoningInputItem, Tag("reasoning")]
    | Annotated[ToolSearchInputItem, Tag("tool_search_call")]
    | Annotated[ToolSearchInputItem, Tag("tool_search_output")],
    Discriminator(_item_type),
]


class FunctionTool(_Wire):
    """A function tool, in the Responses API's flat form; ``defer_loading``: loaded only
    when a tool search finds it."""

    type: Literal["function"]
    name: str = Field(min_length=1)
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None
    defer_loading: bool | None = None


class ToolSearchTool(_Wire):
    """``{"type": "tool_search"}``: search the deferred tools, load what is found.
    ``execution`` ``"server"`` (or absent) is hosted: toolgraph runs the search."""

    type: Literal["tool_search"]
    execution: Literal["server", "client"] | None = None
    description: str | None = None
    parameters: dict[str, Any] | None = None


def _tool_type(value: Any) -> str | None:
    kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    return kind if isinstance(kind, str) else None


RequestTool = Annotated[
    Annotated[FunctionTool, Tag("function")] | Annotated[ToolSearchTool, Tag("tool_search")],
    Discriminator(_tool_type),
]


class TextFormat(_Wire):
    type: Literal["text", "json_object", "json_schema"]
    name: str | None = None
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")
    description: str | None = None
    strict: bool | None = None


class TextConfig(_Wire):
    format: TextFormat | None = None
    verbosity: str | None = None


class Reasoning(_Wire):
    effort: str | None = None
    summary: str | None = None


class ResponsesRequest(_Wire):
    """``POST /v1/responses``, as far as toolgraph translates it."""

    model: str = Field(min_length=1)
    input: str | list[InputItem]
    instructions: str | None = None
    tools: list[RequestTool] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    text: TextConfig | None = None
    max_output_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, ge=0, le=1)
    reasoning: Reasoning | None = None
    metadata: dict[str, str] | None = None
    user: str | None = None
    store: bool | None = None
    stream: bool | None = None
    previous_response_id: str | None = None
    toolgraph: ToolgraphOptions | None = None

    def hosted_tool_search(self) -> bool:
        """Whether the request asks toolgraph to search its deferred tools."""
        searches = [tool for tool in self.tools or () if isinstance(tool, ToolSearchTool)]
        return any(tool.execution != "client" for tool in searches)

    def client_tool_search(self) -> bool:
        return any(
            isinstance(tool, ToolSearchTool) and tool.execution == "client"
            for tool in self.tools or ()
        )


class ResponsesHead(RelayedRequest):
    """What toolgraph reads of a request before it knows whether it relays the request as
    it is (to an upstream that speaks the Responses API) or translates it: the model it
    routes and what decides the mode. Nothing else in the body is checked yet."""

    model: str = Field(min_length=1)
    stream: bool | None = None
    tools: list[Any] | None = None
    input: Any = None
    toolgraph: ToolgraphOptions | None = None

    @property
    def streams(self) -> bool:
        return bool(self.stream)

    def resolve_mode(self, default: Mode) -> Mode:
        """The request's mode, by chat's rule (:func:`~proxy.protocol.chat.resolve_mode`)."""
        items = self.input if isinstance(self.input, list) else ()
        results = any(
            isinstance(item, dict) and item.get("type") == "function_call_output" for item in items
        )
        return resolve_mode(self.toolgraph, bool(self.tools), results, default)


RESPONSES = Endpoint("/responses", ResponsesHead, chat_model=True)


def parse_head(body: object) -> ResponsesHead:
    """The head of a decoded body, or :class:`InvalidRequest` naming the bad field."""
    head = RESPONSES.parse(body)
    assert isinstance(head, ResponsesHead)
    return head


def parse_responses_request(body: object) -> ResponsesRequest:
    """Validate a decoded body, or raise :class:`InvalidRequest` naming the first bad field.

    An input item of a type toolgraph does not translate is named as such, not as a
    failed union: the client learns which item and which types would do.
    """
    if not isinstance(body, dict):
        raise InvalidRequest("the request body must be a JSON object", code="invalid_type")
    _check_item_types(body.get("input"))
    for name in _UNTRANSLATED:
        if body.get(name) not in (None, False):
            raise InvalidRequest(
                f"'{name}' needs an upstream that speaks the Responses API; this request "
                "goes through chat completions (upstream_responses, or its mode)",
                param=name,
                code="unsupported_parameter",
            )
    try:
        return ResponsesRequest.model_validate(body)
    except ValidationError as exc:
        # ``input`` is a string or a list: the deepest error is the one in what was sent
        error = max(exc.errors(), key=lambda error: len(error["loc"]))
        raise invalid_request(_untagged(error)) from None


def _untagged(error: ErrorDetails) -> ErrorDetails:
    """The error with the item type pydantic puts in its location (``input.[0].message``)
    taken out: the client's body has no such field."""
    loc = error["loc"]
    return {**error, "loc": tuple(part for part in loc if part not in ITEM_TYPES)}


#: What a chat completions upstream cannot do, refused rather than silently dropped.
_UNTRANSLATED = ("background", "conversation", "prompt")


def _check_item_types(items: object) -> None:
    if not isinstance(items, list):
        return
    for index, item in enumerate(items):
        kind = _item_type(item)
        if isinstance(item, dict) and kind not in ITEM_TYPES:
            raise InvalidRequest(
                f"input[{index}] is an item of type {kind!r}, which toolgraph does not "
                f"translate; supported: {', '.join(ITEM_TYPES)}",
                param=f"input.[{index}].type",
                code="unsupported_item_type",
            )


# --- the answer: response ----------------------------------------------------------------


class OutputText(WireReply):
    type: str = "output_text"
    text: str = ""
    annotations: list[dict[str, Any]] = Field(default_factory=list)
    logprobs: list[dict[str, Any]] = Field(default_factory=list)


class Refusal(WireReply):
    type: str = "refusal"
    refusal: str = ""


class OutputMessage(WireReply):
    type: str = "message"
    id: str = ""
    status: str = "completed"
    role: str = "assistant"
    content: list[OutputText | Refusal] = Field(default_factory=list)


class FunctionToolCall(WireReply):
    type: str = "function_call"
    id: str = ""
    call_id: str = ""
    name: str = ""
    arguments: str = ""
    status: str = "completed"


class SummaryText(WireReply):
    type: str = "summary_text"
    text: str = ""


class ReasoningItem(WireReply):
    type: str = "reasoning"
    id: str = ""
    summary: list[SummaryText] = Field(default_factory=list)
    status: str | None = None


class ToolSearchCall(WireReply):
    """The search a hosted ``tool_search`` ran: its ``arguments`` are the query."""

    type: str = "tool_search_call"
    id: str = ""
    call_id: str | None = None
    arguments: dict[str, Any] = Field(default_factory=dict)
    execution: str = "server"
    status: str = "completed"


class ToolSearchOutput(WireReply):
    """The tools a hosted ``tool_search`` loaded, as the request defined them."""

    type: str = "tool_search_output"
    id: str = ""
    call_id: str | None = None
    execution: str = "server"
    status: str = "completed"
    tools: list[dict[str, Any]] = Field(default_factory=list)


OutputItem = OutputMessage | FunctionToolCall | ReasoningItem | ToolSearchCall | ToolSearchOutput


class InputTokensDetails(WireReply):
    cached_tokens: int = 0
    cache_write_tokens: int = 0


class OutputTokensDetails(WireReply):
    reasoning_tokens: int = 0


class ResponseUsage(WireReply):
    input_tokens: int = 0
    input_tokens_details: InputTokensDetails = Field(default_factory=InputTokensDetails)
    output_tokens: int = 0
    output_tokens_details: OutputTokensDetails = Field(default_factory=OutputTokensDetails)
    total_tokens: int = 0


class ResponseError(WireReply):
    code: str = "server_error"
    message: str = ""


class IncompleteDetails(WireReply):
    reason: str


class Response(WireReply):
    id: str = ""
    object: str = "response"
    created_at: int = 0
    status: str = "completed"
    error: ResponseError | None = None
    incomplete_details: IncompleteDetails | None = None
    instructions: str | None = None
    max_output_tokens: int | None = None
    model: str = ""
    output: list[OutputItem] = Field(default_factory=list)
    parallel_tool_calls: bool = True
    previous_response_id: str | None = None
    reasoning: dict[str, Any] | None = None
    store: bool = True
    temperature: float | None = None
    text: dict[str, Any] | None = None
    tool_choice: str | dict[str, Any] = "auto"
    tools: list[dict[str, Any]] = Field(default_factory=list)
    top_p: float | None = None
    truncation: str = "disabled"
    usage: ResponseUsage | None = None
    user: str | None = None
    metadata: dict[str, str] = Field(default_factory=dict)

    def output_text(self) -> str:
        """The text of every message in ``output``, joined (the SDK's ``output_text``)."""
        return "".join(
            part.text
            for item in self.output
            if isinstance(item, OutputMessage)
            for part in item.content
            if isinstance(part, OutputText)
        )


class ResponseItemList(WireReply):
    """A page of a stored response's input items (``GET /v1/responses/{id}/input_items``)."""

    object: str = "list"
    data: list[dict[str, Any]] = Field(default_factory=list)
    first_id: str | None = None
    last_id: str | None = None
    has_more: bool = False


class DeletedResponse(WireReply):
    id: str
    object: str = "response.deleted"
    deleted: bool = True


# --- the stream: typed events ----------------------------------------------------------------


class StreamEvent(WireReply):
    """One event of a stream; ``type`` is also the SSE ``event:`` name."""

    type: str
    sequence_number: int = 0


class ResponseEvent(StreamEvent):
    """``response.created``, ``.in_progress``, ``.completed``, ``.incomplete``, ``.failed``."""

    response: Response


class OutputItemEvent(StreamEvent):
    """``response.output_item.added`` and ``.done``."""

    output_index: int
    item: OutputItem


class ContentPartEvent(StreamEvent):
    """``response.content_part.added`` and ``.done``."""

    item_id: str
    output_index: int
    content_index: int = 0
    part: OutputText | Refusal


class TextDeltaEvent(StreamEvent):
    """``response.output_text.delta``."""

    item_id: str
    output_index: int
    content_index: int = 0
    delta: str
    logprobs: list[dict[str, Any]] = Field(default_factory=list)


class TextDoneEvent(StreamEvent):
    """``response.output_text.done``."""

    item_id: str
    output_index: int
    content_index: int = 0
    text: str
    logprobs: list[dict[str, Any]] = Field(default_factory=list)


class ArgumentsDeltaEvent(StreamEvent):
    """``response.function_call_arguments.delta``."""

    item_id: str
    output_index: int
    delta: str


class ArgumentsDoneEvent(StreamEvent):
    """``response.function_call_arguments.done``."""

    item_id: str
    output_index: int
    name: str
    arguments: str


class SummaryPartEvent(StreamEvent):
    """``response.reasoning_summary_part.added`` and ``.done``."""

    item_id: str
    output_index: int
    summary_index: int = 0
    part: SummaryText


class SummaryTextDeltaEvent(StreamEvent):
    """``response.reasoning_summary_text.delta``."""

    item_id: str
    output_index: int
    summary_index: int = 0
    delta: str


class SummaryTextDoneEvent(StreamEvent):
    """``response.reasoning_summary_text.done``."""

    item_id: str
    output_index: int
    summary_index: int = 0
    text: str


class ErrorEvent(StreamEvent):
    """``error``: the stream failed; ``response.failed`` follows it."""

    type: str = "error"
    code: str | None = None
    message: str = ""
    param: str | None = None
