"""A chat completion as the Responses API's ``response``, and a response as the chat
message that continues its conversation."""

from __future__ import annotations

import time
import uuid

from proxy.context import ToolSearch
from proxy.protocol.chat import ChatCompletion, CompletionUsage
from proxy.protocol.responses import (
    FunctionTool,
    FunctionToolCall,
    IncompleteDetails,
    InputTokensDetails,
    OutputMessage,
    OutputText,
    OutputTokensDetails,
    ReasoningItem,
    Refusal,
    Response,
    ResponsesRequest,
    ResponseUsage,
    SummaryText,
    ToolSearchCall,
    ToolSearchOutput,
)


def new_id(prefix: str) -> str:
    """An id in OpenAI's style: ``resp_…``, ``msg_…``, ``fc_…``, ``rs_…``."""
    return f"{prefix}_{uuid.uuid4().hex}"


def search_items(
    request: ResponsesRequest, search: ToolSearch | None
) -> list[ToolSearchCall | ToolSearchOutput]:
    """The items of the hosted tool search select mode ran for ``request``: the search
    (its query) and what it loaded, each tool as the request defined it; none when the
    request has no hosted ``tool_search``."""
    if search is None or not request.hosted_tool_search():
        return []
    call_id = new_id("call")
    functions = [tool for tool in request.tools or () if isinstance(tool, FunctionTool)]
    loaded = [
        tool.model_dump(exclude_unset=True) for tool in functions if tool.name in search.loaded
    ]
    return [
        ToolSearchCall(id=new_id("tsc"), call_id=call_id, arguments={"query": search.query}),
        ToolSearchOutput(id=new_id("tso"), call_id=call_id, tools=loaded),
    ]


def skeleton(request: ResponsesRequest, response_id: str | None = None) -> Response:
    """The response to ``request`` before any output: what it echoes of the request."""
    text_format = request.text.format if request.text and request.text.format else None
    return Response(
        id=response_id or new_id("resp"),
        created_at=int(time.time()),
        status="in_progress",
        error=None,
        incomplete_details=None,
        instructions=request.instructions,
        max_output_tokens=request.max_output_tokens,
        model=request.model,
        output=[],
        parallel_tool_calls=request.parallel_tool_calls is not False,
        previous_response_id=request.previous_response_id,
        reasoning=request.reasoning.model_dump(exclude_unset=True) if request.reasoning else None,
        store=request.store is not False,
        temperature=request.temperature,
        text={"format": text_format.model_dump(by_alias=True, exclude_unset=True)}
        if text_format
        else {"format": {"type": "text"}},
        tool_choice=request.tool_choice if request.tool_choice is not None else "auto",
        tools=[tool.model_dump(exclude_unset=True) for tool in request.tools or ()],
        top_p=request.top_p,
        truncation="disabled",
        usage=None,
        user=request.user,
        metadata=request.metadata or {},
    )


def to_response(completion: ChatCompletion, response: Response) -> Response:
    """``response`` (a :func:`skeleton`) finished with the chat completion's answer."""
    choice = completion.choices[0] if completion.choices else None
    if choice is not None:
        message = choice.message
        reasoning = (message.model_extra or {}).get("reasoning_content")
        if isinstance(reasoning, str) and reasoning:
            response.output.append(reasoning_item(reasoning, "completed"))
        parts: list[OutputText | Refusal] = []
        if message.content:
            parts.append(OutputText(text=message.content))
        if message.refusal:
            parts.append(Refusal(refusal=message.refusal))
        if parts:
            response.output.append(OutputMessage(id=new_id("msg"), content=parts))
        deferred = deferred_names(response)
        for call in message.tool_calls or ():
            function = call.function
            name, arguments = (function.name, function.arguments) if function else ("", "")
            response.output.append(function_call(call.id, name, deferred, arguments=arguments))
    finish_response(response, choice.finish_reason if choice else None, completion.usage)
    return response


def deferred_names(response: Response) -> set[str]:
    """The function tools of ``response``'s request marked ``defer_loading``."""
    return {
        str(tool["name"])
        for tool in response.tools
        if tool.get("type") == "function" and tool.get("defer_loading") is True
    }


def function_call(call_id: str, name: str, deferred: set[str], **fields: str) -> FunctionToolCall:
    """A ``function_call`` output item. A call of a deferred function carries ``namespace``
    equal to its name, OpenAI's shape for a top-level function loaded by a tool search
    (the Agents SDK finds the function to run by it)."""
    item = {"id": new_id("fc"), "call_id": call_id, "name": name, **fields}
    if name in deferred:
        item["namespace"] = name
    return FunctionToolCall.model_validate(item)


def reasoning_item(text: str, status: str) -> ReasoningItem:
    return ReasoningItem(id=new_id("rs"), summary=[SummaryText(text=text)], status=status)


def finish_response(
    response: Response, finish_reason: str | None, usage: CompletionUsage | None
) -> None:
    if finish_reason == "length":
        response.status = "incomplete"
        response.incomplete_details = IncompleteDetails(reason="max_output_tokens")
    elif finish_reason == "content_filter":
        response.status = "incomplete"
        response.incomplete_details = IncompleteDetails(reason="content_filter")
    else:
        response.status = "completed"
    if usage is not None:
        response.usage = to_usage(usage)


def to_usage(usage: CompletionUsage) -> ResponseUsage:
    extra = usage.model_extra or {}
    prompt_details = extra.get("prompt_tokens_details") or {}
    completion_details = extra.get("completion_tokens_details") or {}
    return ResponseUsage(
        input_tokens=usage.prompt_tokens,
        input_tokens_details=InputTokensDetails(
            cached_tokens=prompt_details.get("cached_tokens") or 0
        ),
        output_tokens=usage.completion_tokens,
        output_tokens_details=OutputTokensDetails(
            reasoning_tokens=completion_details.get("reasoning_tokens") or 0
        ),
        total_tokens=usage.total_tokens or usage.prompt_tokens + usage.completion_tokens,
    )
