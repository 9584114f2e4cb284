"""Qwen2.5's chat format with tools: OpenAI messages to a prompt, a reply to tool calls.

llama-cpp-python 0.3.36's ``chatml-function-calling`` handler is not this model's
format: it returns ``""`` or ``"functions.x:"`` when Qwen2.5 answers in text, and
the tool calls Qwen2.5 writes (``<tool_call>{…}</tool_call>``, as it was trained,
or a fenced JSON block) never become ``tool_calls``. This module renders the
prompt as Qwen2.5's own chat template does and parses both spellings back.

Standard library only: :mod:`eval.llm.server` imports it inside the llama venv,
and the unit tests import it without a model.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

DEFAULT_SYSTEM = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."
END = "<|im_end|>"
_TOOLS_HEAD = (
    "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>"
)
_TOOLS_TAIL = (
    "\n</tools>\n\nFor each function call, return a json object with function name and "
    "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n"
    '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
)
_TAGGED = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)
_FENCED = re.compile(r"```(?:json|JSON|tool_call)?\s*\n?(.*?)```", re.DOTALL)


@dataclass(frozen=True, slots=True)
class ToolCall:
    name: str
    arguments: str  # a JSON object's text, as OpenAI sends it

    def openai(self) -> dict[str, Any]:
        return {
            "id": f"call_{uuid.uuid4().hex[:24]}",
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


@dataclass(frozen=True, slots=True)
class ParsedReply:
    content: str | None
    tool_calls: tuple[ToolCall, ...] = ()


def render_prompt(
    messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] = ()
) -> str:
    """The prompt Qwen2.5's chat template makes of ``messages`` and ``tools``, ready for
    the assistant's turn."""
    rest = list(messages)
    system = DEFAULT_SYSTEM
    if rest and rest[0].get("role") in ("system", "developer"):
        system = _text(rest.pop(0).get("content"))
    if tools:
        listed = "".join("\n" + json.dumps(_as_tool(tool), ensure_ascii=False) for tool in tools)
        system += _TOOLS_HEAD + listed + _TOOLS_TAIL
    parts = [_turn("system", system)]
    for index, message in enumerate(rest):
        parts.append(_render_message(message, rest, index))
    parts.append("<|im_start|>assistant\n")
    return "".join(parts)


def _render_message(message: Mapping[str, Any], messages: list[Mapping[str, Any]], i: int) -> str:
    role = str(message.get("role"))
    if role == "tool":
        opens = i == 0 or messages[i - 1].get("role") != "tool"
        closes = i + 1 == len(messages) or messages[i + 1].get("role") != "tool"
        body = f"\n<tool_response>\n{_text(message.get('content'))}\n</tool_response>"
        return ("<|im_start|>user" if opens else "") + body + (f"{END}\n" if closes else "")
    if role == "assistant" and message.get("tool_calls"):
        text = _text(message.get("content"))
        body = f"\n{text}" if text else ""
        for call in message["tool_calls"]:
            function = call.get("function") or {}
            arguments = function.get("arguments") or "{}"
            if not isinstance(arguments, str):
                arguments = json.dumps(arguments)
            body += f'\n<tool_call>\n{{"name": "{function.get("name")}", "arguments": {arguments}}}'
            body += "\n</tool_call>"
        return f"<|im_start|>assistant{body}{END}\n"
    return _turn("user" if role == "function" else role, _text(message.get("content")))


def _turn(role: str, content: str) -> str:
    return f"<|im_start|>{role}\n{content}{END}\n"


def _text(content: object) -> str:
    """A message's content as text: a string, or the text parts of a list of parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return str(content)


def _as_tool(tool: Mapping[str, Any]) -> Mapping[str, Any]:
    return tool if "function" in tool else {"type": "function", "function": tool}


def parse_reply(text: str, tool_names: Sequence[str]) -> ParsedReply:
    """Tool calls in ``text`` (``<tool_call>`` tags, else fenced JSON, else the whole
    reply as one JSON object) to names in ``tool_names``; text is content otherwise.

    A call to a name that is not offered stays text: turning it into a tool call would
    hand the client a function it never declared.
    """
    names = set(tool_names)
    if not names:
        return ParsedReply(text)
    for pattern in (_TAGGED, _FENCED):
        blocks = pattern.findall(text)
        calls = [call for block in blocks for call in _calls_in(block, names)]
        if calls:
            return ParsedReply(_leftover(pattern.sub("", text)), tuple(calls))
    calls = _calls_in(text.strip(), names)
    return ParsedReply(None, tuple(calls)) if calls else ParsedReply(text)


def _leftover(text: str) -> str | None:
    return text.strip() or None


def _calls_in(block: str, names: set[str]) -> list[ToolCall]:
    try:
        value = json.loads(block)
    except ValueError:
        return []
    items = value if isinstance(value, list) else [value]
    calls = [_call(item, names) for item in items]
    return [call for call in calls if call is not None]


def _call(item: object, names: set[str]) -> ToolCall | None:
    if not isinstance(item, dict):
        return None
    name = item.get("name")
    if isinstance(item.get("function"), dict):  # OpenAI's own shape, written out
        return _call(item["function"], names)
    if not isinstance(name, str):
        return None
    name = name.removeprefix("functions.")
    arguments = item.get("arguments", item.get("parameters", {}))
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return None
    if name not in names or not isinstance(arguments, dict):
        return None
    return ToolCall(name, json.dumps(arguments, ensure_ascii=False))
