"""A small TaskBench-format catalog on disk, its graph store and index, and the real
small embedding model, loaded once per session."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval.plan_data import Dataset, load_dataset
from proxy.plan.candidates import CandidateFinder
from retriever.bulk import embed_documents
from retriever.catalog import catalog_documents
from retriever.config import RetrieverConfig
from retriever.embedder import Encoder, load_encoder
from retriever.index import ToolIndex

TOOLS = [
    ("flight_search", "Search flights between two cities on a date", ["Flight"]),
    ("book_flight", "Book a seat on a flight for a passenger", ["Flight"]),
    ("flight_ticket_changing", "Change a booked flight ticket to another date", ["Flight"]),
    ("hotel_search", "Find hotels in a city with free rooms", ["Hotel"]),
    ("book_hotel", "Reserve a room in a hotel for given nights", ["Hotel"]),
    ("weather_query", "Weather forecast for a city", ["Weather"]),
    ("send_sms", "Send a text message to a phone number", ["Message"]),
    ("set_reminder", "Set a reminder for a time", ["Calendar"]),
    ("currency_convert", "Convert money between currencies", ["Finance"]),
    ("stock_query", "Latest stock price of a company", ["Finance"]),
]
LINKS = [
    ("flight_search", "book_flight"),
    ("flight_search", "flight_ticket_changing"),
    ("book_flight", "send_sms"),
    ("book_flight", "set_reminder"),
    ("hotel_search", "book_hotel"),
    ("book_hotel", "send_sms"),
    ("weather_query", "set_reminder"),
]
REQUESTS = [
    {
        "id": "1",
        "user_request": "Book me a flight from Beijing to Paris and text my wife.",
        "task_steps": [
            "Step 1 Call flight_search to find flights from Beijing to Paris on May 3",
            "Step 2 Call book_flight to book a seat on the flight for Li Lei",
            "Step 3 Call send_sms to send my wife a text message with the flight details",
        ],
        "task_nodes": [{"task": "flight_search"}, {"task": "book_flight"}, {"task": "send_sms"}],
        "task_links": [
            {"source": "flight_search", "target": "book_flight"},
            {"source": "book_flight", "target": "send_sms"},
        ],
        "type": "chain",
    },
    {
        "id": "2",
        "user_request": "Find a hotel in Rome and reserve two nights.",
        "task_steps": [
            "Step 1 Call hotel_search to look for hotels in Rome",
            "Step 2 Call book_hotel to reserve two nights there",
        ],
        "task_nodes": [{"task": "hotel_search"}, {"task": "book_hotel"}],
        "task_links": [{"source": "hotel_search", "target": "book_hotel"}],
        "type": "chain",
    },
    {
        "id": "3",
        "user_request": "What is Apple's share price?",
        "task_steps": ["Step 1 Call stock_query to get the share price of Apple"],
        "task_nodes": [{"task": "stock_query"}],
        "task_links": [],
        "type": "single",
    },
    {
        "id": "4",
        "user_request": "Use a tool nobody has.",
        "task_steps": ["Step 1 Call teleport to go to Mars"],
        "task_nodes": [{"task": "teleport"}],
        "task_links": [],
        "type": "single",
    },
]


def write_taskbench(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    nodes = [{"id": name, "desc": desc, "domain": domain} for name, desc, domain in TOOLS]
    (folder / "tool_desc.json").write_text(json.dumps({"nodes": nodes}))
    links = [{"source": s, "target": t} for s, t in LINKS]
    (folder / "graph_desc.json").write_text(json.dumps({"nodes": nodes, "links": links}))
    (folder / "data.json").write_text("\n".join(json.dumps(r) for r in REQUESTS) + "\n")
    (folder / "split_ids.json").write_text(json.dumps({"test_ids": {"chain": ["1", "2"]}}))
    return folder


@pytest.fixture(scope="session")
def encoder(query_precision: str) -> Encoder:
    return load_encoder(RetrieverConfig(device="cpu", onnx_query_precision=query_precision))


@pytest.fixture(scope="session")
def taskbench_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_taskbench(tmp_path_factory.mktemp("taskbench") / "travel")


@pytest.fixture(scope="session")
def dataset(taskbench_dir: Path) -> Dataset:
    return load_dataset(taskbench_dir)


@pytest.fixture(scope="session")
def index(dataset: Dataset, encoder: Encoder) -> ToolIndex:
    documents = catalog_documents(dataset.tools, RetrieverConfig())
    vectors = embed_documents(encoder, [d.text for d in documents], progress=False)
    return ToolIndex(documents, vectors)


@pytest.fixture
def finder(dataset: Dataset, index: ToolIndex) -> CandidateFinder:
    return CandidateFinder(dataset.store, index)
