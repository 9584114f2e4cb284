"""Decoupled generation over the database pack: a table and a column that an earlier
call of the plan named are offered to the argument writer as numbered lists, and the
numbers the model answers become the names the tool runs with."""

from __future__ import annotations

import json
import re
from typing import Any

from proxy.config import DatabasePackSettings, ExecutorSettings
from proxy.execute.plan import PlanNode, ToolPlan
from proxy.execute.service import ToolExecutor
from proxy.llm import UpstreamModel
from proxy.tools.packs.database.catalog import database_tools
from testing.fake_upstream import FakeUpstream, Script


def listed(prompt: str, param: str) -> dict[str, int]:
    """The numbered list the prompt offers for ``param``: value → number."""
    block = prompt.split(f"\n{param}:\n", 1)[1].split("\n\n", 1)[0]
    return {json.loads(v): int(n) for n, v in re.findall(r"^  (\d+)\. (.+)$", block, re.M)}


def model_answers(request: dict[str, Any]) -> Script:
    prompt = "\n".join(m["content"] for m in request["messages"])
    if '"name": "music_find_columns_containing_value"' in prompt:
        return Script(text=json.dumps({"value": "Germany"}))
    table, column = listed(prompt, "table"), listed(prompt, "column")
    return Script(text=json.dumps({"table": table["customers"], "column": column["country"]}))


async def test_the_table_and_column_found_are_chosen_by_number(
    sqlite_url: str, upstream: FakeUpstream, model: UpstreamModel
) -> None:
    settings = DatabasePackSettings(name="music", url=sqlite_url)
    tools = {tool.name: tool for tool in database_tools([settings])}
    plan = ToolPlan(
        nodes=(
            PlanNode(id="s1", tool="music_find_columns_containing_value", task="Where is Germany?"),
            PlanNode(
                id="s2",
                tool="music_get_distinct_values",
                task="How many customers per country?",
                needs=("s1",),
            ),
        )
    )
    upstream.responder = model_answers
    executor = ToolExecutor(ExecutorSettings(), databases=[settings])
    try:
        executed = await executor.execute(plan, tools, model)
    finally:
        await executor.aclose()
    assert executed.run.ok, executed.run.unfinished()
    assert executed.run.records["s2"].arguments == {"table": "customers", "column": "country"}
    prompt = "\n".join(m["content"] for m in upstream.requests[1].body["messages"])
    assert set(listed(prompt, "table")) == {"customers", "invoices"}  # what s1 found
    assert set(listed(prompt, "column")) == {"country", "billing_country"}
    output = executed.run.records["s2"].output
    assert isinstance(output, dict)
    values = output["values"]
    assert isinstance(values, list)
    assert values[0] == {"value": "Germany", "count": 2}
