"""Qwen2.5's tool format: the prompt as its chat template renders it, replies parsed back."""

from __future__ import annotations

import json

import pytest

from eval.llm.qwen_format import DEFAULT_SYSTEM, parse_reply, render_prompt

TOOL = {
    "type": "function",
    "function": {
        "name": "evaluate_expression",
        "description": "Evaluate a math expression.",
        "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}},
    },
}
NAMES = ["evaluate_expression", "vector_operation"]


def test_prompt_without_tools_has_the_default_system_turn() -> None:
    prompt = render_prompt([{"role": "user", "content": "Hi"}])
    assert prompt == (
        f"<|im_start|>system\n{DEFAULT_SYSTEM}<|im_end|>\n"
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    )


def test_prompt_lists_tools_in_the_system_turn() -> None:
    prompt = render_prompt([{"role": "system", "content": "Be brief."}], [TOOL])
    assert prompt.startswith("<|im_start|>system\nBe brief.\n\n# Tools\n")
    assert "\n<tools>\n" + json.dumps(TOOL) + "\n</tools>" in prompt
    assert '<tool_call>\n{"name": <function-name>' in prompt


def test_prompt_renders_calls_and_consecutive_results_in_one_user_turn() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}
    prompt = render_prompt(
        [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "1"},
            {"role": "tool", "tool_call_id": "c2", "content": "2"},
        ]
    )
    assert (
        '<|im_start|>assistant\n<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call><|im_end|>\n'
        in prompt
    )
    assert (
        "<|im_start|>user\n<tool_response>\n1\n</tool_response>"
        "\n<tool_response>\n2\n</tool_response><|im_end|>\n"
    ) in prompt


def test_text_parts_are_joined() -> None:
    prompt = render_prompt(
        [
            {
                "role": "user",
                "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
            }
        ]
    )
    assert "<|im_start|>user\nab<|im_end|>" in prompt


@pytest.mark.parametrize(
    ("reply", "calls", "content"),
    [
        (
            '<tool_call>\n{"name": "evaluate_expression", "arguments": {"expression": "2*pi"}}\n</tool_call>',
            [("evaluate_expression", {"expression": "2*pi"})],
            None,
        ),
        # cut at the stop token before the closing tag
        (
            '<tool_call>\n{"name": "evaluate_expression", "arguments": {"expression": "1"}}',
            [("evaluate_expression", {"expression": "1"})],
            None,
        ),
        # two calls, and text around them
        (
            'Sure.\n<tool_call>{"name": "evaluate_expression", "arguments": {"expression": "1"}}</tool_call>\n<tool_call>{"name": "vector_operation", "arguments": {"operation": "dot"}}</tool_call>',
            [
                ("evaluate_expression", {"expression": "1"}),
                ("vector_operation", {"operation": "dot"}),
            ],
            "Sure.",
        ),
        # fenced JSON, as this model often writes it
        (
            '```json\n{"name": "evaluate_expression", "arguments": {"expression": "3"}}\n```',
            [("evaluate_expression", {"expression": "3"})],
            None,
        ),
        # a fenced list of calls, arguments as a string, the "functions." prefix
        (
            '```\n[{"name": "functions.evaluate_expression", "arguments": "{\\"expression\\": \\"4\\"}"}]\n```',
            [("evaluate_expression", {"expression": "4"})],
            None,
        ),
        # the whole reply one bare object, "parameters" for "arguments"
        (
            '{"name": "vector_operation", "parameters": {"operation": "cross"}}',
            [("vector_operation", {"operation": "cross"})],
            None,
        ),
        # OpenAI's shape written out
        (
            '<tool_call>{"type": "function", "function": {"name": "evaluate_expression", "arguments": {}}}</tool_call>',
            [("evaluate_expression", {})],
            None,
        ),
    ],
)
def test_tool_calls_are_parsed(
    reply: str, calls: list[tuple[str, dict[str, object]]], content: str | None
) -> None:
    parsed = parse_reply(reply, NAMES)
    assert [(c.name, json.loads(c.arguments)) for c in parsed.tool_calls] == calls
    assert parsed.content == content


@pytest.mark.parametrize(
    "reply",
    [
        "The answer is 42.",
        "",
        # a name the client did not offer stays text
        '<tool_call>{"name": "get_weather", "arguments": {}}</tool_call>',
        # code that is not a call
        "```python\nprint(2 * 3.14159 * 50)\n```",
        '```json\n{"result": 314.15}\n```',
        # broken JSON
        '<tool_call>{"name": "evaluate_expression", "arguments": {</tool_call>',
    ],
)
def test_text_stays_text(reply: str) -> None:
    parsed = parse_reply(reply, NAMES)
    assert parsed.tool_calls == ()
    assert parsed.content == reply


def test_without_tools_nothing_is_parsed() -> None:
    reply = '{"name": "evaluate_expression", "arguments": {}}'
    assert parse_reply(reply, []).content == reply


def test_openai_shape_of_a_call() -> None:
    (call,) = parse_reply(
        '{"name": "evaluate_expression", "arguments": {"expression": "1"}}', NAMES
    ).tool_calls
    shaped = call.openai()
    assert shaped["type"] == "function"
    assert shaped["id"].startswith("call_")
    assert shaped["function"] == {"name": "evaluate_expression", "arguments": '{"expression": "1"}'}
