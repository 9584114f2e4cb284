"""The import adapters, on small hand-made files and on slices of the shared data sets."""

from __future__ import annotations

import gzip
import itertools
from pathlib import Path

import pytest

from graph_store.embedded import InProcessStore
from graph_store.ingest.catalog import import_paths, parse_file
from graph_store.ingest.openapi import parse_openapi
from graph_store.ingest.toolbench import toolbench_name
from graph_store.models import ParamLocation, Tool
from graph_store.store import GraphStore
from tests.graph_store.conftest import FIXTURES


def _by_name(store: GraphStore) -> dict[str, Tool]:
    return {tool.name: tool for tool in store.list_tools()}


def test_openai_specs_import_and_bad_items_are_named(store: GraphStore) -> None:
    report = import_paths(store, [FIXTURES / "functions.json"])
    tools = _by_name(store)
    assert sorted(tools) == ["book_hotel", "get_weather"]
    weather = tools["get_weather"]
    assert weather.required_params() == ["city"]
    assert weather.param_schemas()["unit"] == {"type": "string", "enum": ["c", "f"], "default": "c"}
    assert (weather.group, weather.category) == ("functions", "custom")
    problems = sorted((e.item, e.problem) for e in report.errors)
    assert problems == [
        ("tools[1]", "a function needs a 'name' string"),
        (
            "tools[2] (get weather)",
            "name 'get_weather' is already taken by 'get_weather' in "
            f"{FIXTURES / 'functions.json'}",
        ),
        ("tools[3] (Search Hotels (v2))", "'parameters' must be a JSON Schema of type object"),
    ]
    assert all(e.file == str(FIXTURES / "functions.json") for e in report.errors)


def test_reimport_updates_in_place(tmp_path: Path) -> None:
    store = InProcessStore.open(tmp_path)
    first = import_paths(store, [FIXTURES / "functions.json"])
    second = import_paths(store, [FIXTURES / "functions.json"])
    assert (first.created, first.updated) == (2, 0)
    assert (second.created, second.updated) == (0, 2)
    assert store.count_tools() == 2


def test_openapi_operations_become_tools_with_locations_and_resolved_refs() -> None:
    parsed = parse_openapi(FIXTURES / "petstore.yaml")
    tools = {tool.name: tool for tool in parsed.tools}
    assert sorted(tools) == ["addPet", "getPet", "get_pets"]
    get_pet = tools["getPet"]
    assert get_pet.endpoint is not None
    assert get_pet.endpoint.url == "https://eu.pets.example/v1/pets/{petId}"
    assert get_pet.endpoint.locations == {
        "petId": ParamLocation.PATH,
        "X-Trace": ParamLocation.HEADER,
    }
    assert get_pet.required_params() == ["petId"]
    assert (get_pet.group, get_pet.category, get_pet.description) == (
        "pets",
        "Pet Store",
        "Find a pet by id",
    )
    assert get_pet.response_schema is not None
    owner = get_pet.response_schema["properties"]["owner"]  # type: ignore[index,call-overload]
    assert owner == {"type": "object", "properties": {"owner_id": {"type": "string"}}}
    assert get_pet.response_example == {"id": 7, "name": "Rex"}
    add_pet = tools["addPet"]
    assert add_pet.required_params() == ["name"]
    assert add_pet.endpoint is not None
    assert add_pet.endpoint.method == "POST"
    assert add_pet.endpoint.locations == {"name": ParamLocation.BODY, "tag": ParamLocation.BODY}
    assert tools["get_pets"].param_schemas()["limit"]["default"] == 20
    [cycle] = parsed.errors
    assert cycle.item == "GET /loops"
    assert cycle.problem == (
        "$ref cycle: #/components/schemas/A -> #/components/schemas/B -> #/components/schemas/A"
    )


def test_a_broken_document_is_one_error_naming_file_and_line(store: GraphStore) -> None:
    report = import_paths(store, [FIXTURES / "broken.yaml", FIXTURES / "functions.json"])
    broken = [e for e in report.errors if e.file.endswith("broken.yaml")]
    assert [(e.item, e.problem) for e in broken] == [("line 3", "not valid YAML")]
    assert store.count_tools() == 2  # the other file still imported


def test_a_rapidapi_tool_file() -> None:
    parsed = parse_file(FIXTURES / "Travel" / "hotels_com_provider.json")
    tools = {tool.original_name: tool for tool in parsed.tools}
    search = tools["Hotels Search"]
    assert search.name == "hotels_search_for_hotels_com_provider"
    assert search.aliases == ("hotels_search_for_hotels_com_provider",)
    assert (search.category, search.group) == ("Travel", "Hotels Com Provider")
    assert search.group_description == "Search hotels and book them."
    assert search.param_schemas()["region_id"] == {
        "type": "number",
        "description": "Region id",
        "default": "2872",
    }
    assert search.required_params() == ["region_id"]
    assert search.param_schemas()["checkin_date"]["type"] == "string"
    details = tools["Hotel Details"].endpoint
    assert details is not None
    assert details.locations == {"hotel_id": ParamLocation.PATH}
    assert tools["class"].name == "is_class_for_hotels_com_provider"
    assert [(e.item, e.problem) for e in parsed.errors] == [("api_list[3]", "not a JSON object")]


def test_toolbench_names_match_its_call_logs() -> None:
    assert toolbench_name("VIN Decode", "VIN decoder_v4") == "vin_decode_for_vin_decoder_v4"
    assert toolbench_name("5 Day Forecast", "Ski Resort Forecast") == (
        "get_5_day_forecast_for_ski_resort_forecast"
    )
    long = toolbench_name(
        "Get all districts of a city in Vietnam", "Viet Nam administrative divisions"
    )
    assert long == "ricts_of_a_city_in_vietnam_for_viet_nam_administrative_divisions"


def test_a_slice_of_the_toolbench_corpus(shared_data: Path, tmp_path: Path) -> None:
    corpus = shared_data / "toolbench_stable" / "corpus.jsonl.gz"
    sample = tmp_path / "corpus.jsonl"
    with gzip.open(corpus, "rt", encoding="utf-8") as lines:
        sample.write_text("".join(itertools.islice(lines, 300)) + "{not json\n")
    store = InProcessStore()
    report = import_paths(store, [sample])
    assert report.imported > 250
    assert any(e.item == "line 301" and "not JSON" in e.problem for e in report.errors)
    chinese = store.get_tool("乐鱼_for_乐鱼")  # ToolBench's own spelling, kept as an alias
    assert chinese is not None
    assert chinese.name.startswith("for_")
    assert all(len(t.name) <= 64 for t in store.list_tools())
    with_schema = [t for t in store.list_tools() if t.response_schema]
    assert with_schema, "the corpus slice carries response schemas"


def test_taskbench_and_ultratool_catalogs(shared_data: Path) -> None:
    store = InProcessStore()
    report = import_paths(store, [shared_data / "taskbench" / "data_huggingface"])
    assert (report.imported, report.errors) == (23, [])
    assert {e.file.rsplit("/", 1)[-1] for e in report.skipped} == {
        "alignment_ids.json",
        "user_requests.json",
    }
    translation = store.get_tool("Translation")
    assert translation is not None
    assert translation.category == "huggingface"
    assert translation.required_params() == ["text"]
    assert translation.response_schema is not None
    daily = InProcessStore()
    import_paths(daily, [shared_data / "taskbench" / "data_dailylifeapis" / "tool_desc.json"])
    weather = daily.get_tool("get_weather")
    assert weather is not None
    assert weather.required_params() == ["location", "date"]
    ultra = InProcessStore()
    import_paths(ultra, [shared_data / "ultratool" / "tool_desc.json"])
    assert ultra.count_tools() == 260
    tracking = ultra.get_tool("order_tracking")
    assert tracking is not None
    assert (tracking.category, tracking.group) == ("ultratool", "Tracking")


def test_seal_tools(shared_data: Path, tmp_path: Path) -> None:
    sample = tmp_path / "tool.jsonl"
    with gzip.open(shared_data / "extras" / "seal_tools" / "tool.jsonl.gz", "rt") as lines:
        sample.write_text("".join(itertools.islice(lines, 40)) + '{"api_description": "x"}\n')
    store = InProcessStore()
    report = import_paths(store, [sample])
    assert report.imported == 40
    assert [(e.item, e.problem) for e in report.errors] == [
        ("line 41", "a tool needs an 'api_name' string")
    ]
    evidence = store.get_tool("analyzeEvidence")
    assert evidence is not None
    assert (evidence.category, evidence.group) == ("Chemical Engineering", "Forensic engineering")
    assert evidence.required_params() == ["evidence_type", "method", "sample"]
    assert evidence.response_schema is not None
    assert set(evidence.response_schema["properties"]) == {  # type: ignore[arg-type]
        "analysis_results",
        "conclusion",
    }


@pytest.mark.parametrize("fmt", ["openai", "seal"])
def test_a_forced_format_that_does_not_fit_is_an_error(fmt: str, store: GraphStore) -> None:
    report = import_paths(store, [FIXTURES / "petstore.yaml"], fmt=fmt)
    assert report.imported == 0
    assert len(report.errors) == 1
    assert report.errors[0].file == str(FIXTURES / "petstore.yaml")


def test_a_long_import_reports_progress_within_a_file(shared_data: Path) -> None:
    seal = shared_data / "extras" / "seal_tools" / "tool.jsonl.gz"
    heard: list[tuple[int, int]] = []
    report = import_paths(InProcessStore(), [seal], progress=lambda d, t: heard.append((d, t)))
    assert report.imported == 4076
    size = seal.stat().st_size
    assert len(heard) >= 3  # every 2,000 lines, then the end
    assert all(total == size for _, total in heard)
    done = [d for d, _ in heard]
    assert done == sorted(done)
    assert 0 < done[0] < size
    assert done[-1] == size
