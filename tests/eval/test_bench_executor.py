"""The executor's benchmarks measure what they say they measure."""

from __future__ import annotations

from eval.bench_compression import example_from_schema, example_from_template
from eval.bench_scheduler import measure, shapes


async def test_the_scheduler_bench_separates_ready_queue_from_levels() -> None:
    unbalanced = next(s for s in shapes() if s.name.startswith("two chains"))
    row = await measure(unbalanced, repeats=1)
    assert row.critical_ms == 110.0
    # Sleeps never end early, so lower bounds hold on any machine; that the ready queue
    # beats levels is tested without clocks in tests/execute/test_scheduler.py.
    assert row.toolgraph_ms >= row.critical_ms
    assert row.levels_ms >= 200.0
    assert row.sequential_ms >= 220.0


def test_synthetic_responses_follow_their_schema_and_template() -> None:
    schema = {
        "type": "object",
        "properties": {
            "items": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"id": {"type": "integer"}, "imageUrl": {"type": "string"}},
                },
            },
            "total": {"type": "number"},
        },
    }
    assert example_from_schema(schema) == {
        "items": [{"id": 1234567, "imageUrl": "https://example.com/a/b/c.jpg"}] * 3,
        "total": 12.34567,
    }
    assert example_from_template({"data": [{"name": "str", "n": "int"}], "next": "NoneType"}) == {
        "data": [{"name": "x" * 24, "n": 1234567}] * 3,
        "next": None,
    }
