"""A Responses request as a chat completion request (the table of what maps to what is in
:mod:`proxy.responses_api.translation`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import TypeAdapter

from proxy.errors import InvalidRequest
from proxy.protocol.responses import (
    ITEM_TYPES,
    FunctionCallItem,
    FunctionCallOutputItem,
    FunctionTool,
    InputItem,
    InputMessage,
    ResponsesRequest,
)

Messages = list[dict[str, Any]]


def conversation(request: ResponsesRequest, history: Messages) -> Messages:
    """The conversation so far as chat messages: ``history`` (the messages of the
    responses ``request`` continues, oldest first), then the request's ``input``."""
    return [*history, *input_messages(request, _call_ids(history))]


_ITEMS = TypeAdapter(list[InputItem])


def history_messages(items: Messages) -> Messages:
    """A stored conversation's Responses items (its input, then each response's output)
    as chat messages: read as the ``input`` of a request, as the Responses API reads the
    items a client sends back itself; items chat has no place for (a tool search's) left
    out."""
    kept = [item for item in items if item.get("type", "message") in ITEM_TYPES]
    return _input_messages(_ITEMS.validate_python(kept), set())


def relayed_turn(body: dict[str, Any]) -> dict[str, Any] | None:
    """What select mode reads of a request relayed as it is: its model, instructions,
    message items and function tools (the tool results that answer an upstream's own
    calls, and whatever toolgraph does not translate, left out); None when it has no
    message or no function tool to choose from."""
    tools = [
        t for t in body.get("tools") or () if isinstance(t, dict) and t.get("type") == "function"
    ]
    given = body.get("input")
    if isinstance(given, list):
        given = [
            item
            for item in given
            if isinstance(item, dict) and item.get("type", "message") == "message"
        ]
    if not tools or not given:
        return None
    turn = {"model": body.get("model"), "input": given, "tools": tools}
    for name in ("instructions", "toolgraph"):
        if body.get(name) is not None:
            turn[name] = body[name]
    return turn


def chat_body(request: ResponsesRequest, messages: Messages) -> dict[str, Any]:
    """The chat completion request for ``request``: its ``instructions``, then
    ``messages`` (its :func:`conversation`), its tools and options."""
    system = [{"role": "system", "content": request.instructions}] if request.instructions else []
    body: dict[str, Any] = {"model": request.model, "messages": [*system, *messages]}
    functions = [tool for tool in request.tools or () if isinstance(tool, FunctionTool)]
    if functions:  # a tool_search is not a tool upstream: select mode runs the search
        body["tools"] = [_chat_tool(tool.model_dump(exclude_unset=True)) for tool in functions]
    if request.tool_choice is not None:
        body["tool_choice"] = _tool_choice(request.tool_choice)
    body.update(_options(request))
    if request.stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    if request.toolgraph is not None:
        body["toolgraph"] = request.toolgraph.model_dump(exclude_none=True)
    return body


def input_messages(request: ResponsesRequest, known_calls: set[str]) -> Messages:
    """The request's ``input`` as chat messages; a ``function_call_output`` must answer a
    call made in ``known_calls`` (the history's) or earlier in the input."""
    if isinstance(request.input, str):
        return [{"role": "user", "content": request.input}]
    return _input_messages(request.input, known_calls)


def _input_messages(items: Iterable[InputItem], known_calls: set[str]) -> Messages:
    messages: Messages = []
    for index, item in enumerate(items):
        if isinstance(item, InputMessage):
            messages.append(_message(item, index))
        elif isinstance(item, FunctionCallItem):
            _add_call(messages, item)
            known_calls.add(item.call_id)
        elif isinstance(item, FunctionCallOutputItem):
            if item.call_id not in known_calls:
                raise InvalidRequest(
                    f"No tool call found for function call output with call_id {item.call_id}.",
                    param=f"input.[{index}].call_id",
                    code="unknown_call_id",
                )
            messages.append(_tool_result(item, index))
    return messages


def _call_ids(history: Messages) -> set[str]:
    return {
        call["id"]
        for message in history
        for call in message.get("tool_calls") or ()
        if isinstance(call, dict) and isinstance(call.get("id"), str)
    }


def _message(item: InputMessage, index: int) -> dict[str, Any]:
    role = "system" if item.role == "developer" else item.role
    if isinstance(item.content, str):
        return {"role": role, "content": item.content}
    parts = [_part(part, f"input.[{index}].content.[{n}]") for n, part in enumerate(item.content)]
    if role != "user" or all(part["type"] == "text" for part in parts):
        return {"role": role, "content": "\n".join(_texts(parts, f"input.[{index}].content"))}
    return {"role": role, "content": parts}


def _part(part: dict[str, Any], param: str) -> dict[str, Any]:
    kind = part.get("type")
    if kind in ("input_text", "output_text") and isinstance(part.get("text"), str):
        return {"type": "text", "text": part["text"]}
    if kind == "refusal" and isinstance(part.get("refusal"), str):
        return {"type": "text", "text": part["refusal"]}
    if kind == "input_image" and isinstance(part.get("image_url"), str):
        image = {
            "url": part["image_url"],
            **({"detail": part["detail"]} if "detail" in part else {}),
        }
        return {"type": "image_url", "image_url": image}
    if kind == "input_file" and ("file_data" in part or "file_id" in part):
        fields = ("file_data", "file_id", "filename")
        return {"type": "file", "file": {key: part[key] for key in fields if key in part}}
    raise InvalidRequest(
        f"a content part of type {kind!r} cannot be sent to a chat completions upstream",
        param=param,
        code="unsupported_content_type",
    )


def _texts(parts: Iterable[dict[str, Any]], param: str) -> list[str]:
    texts = []
    for part in parts:
        if part["type"] != "text":
            raise InvalidRequest(
                "only text parts can go in this message on a chat completions upstream",
                param=param,
                code="unsupported_content_type",
            )
        texts.append(part["text"])
    return texts


def _add_call(messages: Messages, item: FunctionCallItem) -> None:
    """A call joins the assistant message before it, as chat spells parallel calls."""
    call = {
        "id": item.call_id,
        "type": "function",
        "function": {"name": item.name, "arguments": item.arguments},
    }
    last = messages[-1] if messages else None
    if last is not None and last["role"] == "assistant":
        last.setdefault("tool_calls", []).append(call)
        return
    messages.append({"role": "assistant", "content": None, "tool_calls": [call]})


def _tool_result(item: FunctionCallOutputItem, index: int) -> dict[str, Any]:
    output = item.output
    if not isinstance(output, str):
        param = f"input.[{index}].output"
        parts = [_part(part, f"{param}.[{n}]") for n, part in enumerate(output)]
        output = "\n".join(_texts(parts, param))
    return {"role": "tool", "tool_call_id": item.call_id, "content": output}


def _chat_tool(tool: dict[str, Any]) -> dict[str, Any]:
    function = {key: value for key, value in tool.items() if key not in ("type", "defer_loading")}
    chat: dict[str, Any] = {"type": "function", "function": function}
    if tool.get("defer_loading"):
        chat["defer_loading"] = True  # select mode's extension field (proxy.select.deferred)
    return chat


def _tool_choice(choice: str | dict[str, Any]) -> str | dict[str, Any]:
    if isinstance(choice, str):
        return choice
    if choice.get("type") == "function" and isinstance(choice.get("name"), str):
        return {"type": "function", "function": {"name": choice["name"]}}
    raise InvalidRequest(
        f"tool_choice of type {choice.get('type')!r} cannot be sent to a chat completions "
        "upstream; use auto, none, required or a function",
        param="tool_choice",
        code="unsupported_tool_choice",
    )


def _options(request: ResponsesRequest) -> dict[str, Any]:
    options: dict[str, Any] = {}
    for name in ("parallel_tool_calls", "temperature", "top_p", "user"):
        if (value := getattr(request, name)) is not None:
            options[name] = value
    if request.max_output_tokens is not None:
        options["max_completion_tokens"] = request.max_output_tokens
    if request.reasoning is not None and request.reasoning.effort is not None:
        options["reasoning_effort"] = request.reasoning.effort
    text = request.text
    if text is not None and text.verbosity is not None:
        options["verbosity"] = text.verbosity
    if text is not None and text.format is not None and text.format.type != "text":
        options["response_format"] = _response_format(text.format.model_dump(by_alias=True))
    return options


def _response_format(format_: dict[str, Any]) -> dict[str, Any]:
    if format_["type"] == "json_object":
        return {"type": "json_object"}
    fields = ("name", "schema", "description", "strict")
    schema = {key: format_[key] for key in fields if format_.get(key) is not None}
    return {"type": "json_schema", "json_schema": schema}
