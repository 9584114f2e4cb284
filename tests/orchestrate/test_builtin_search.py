"""The demo catalog is found by what students ask: the built-in tools under hybrid
retrieval, the way the planner's LLM-free policy picks them.

These requests were used to write the tools' descriptions (the first version put
`vector_operation` first for "What is 2 * pi * 50?"), so they guard the
descriptions against regressions; they are not a held-out measurement.
"""

from __future__ import annotations

import pytest

from proxy.tools.packs.math.catalog import builtin_tools
from retriever.bulk import embed_documents
from retriever.catalog import catalog_documents
from retriever.config import RetrieverConfig
from retriever.embedder import Encoder, load_encoder
from retriever.index import ToolIndex

REQUESTS = [
    ("What is 2 * pi * 50?", "evaluate_expression"),
    ("What is the square root of 144?", "evaluate_expression"),
    ("Compute the wavelength of a 2.4 GHz signal", "evaluate_expression"),
    ("Evaluate 1/sqrt(epsilon_0*mu_0)", "evaluate_expression"),
    ("Integrate x^2 from 0 to 3", "calculate_integral"),
    ("What is the derivative of sin(x)*x?", "calculate_derivative"),
    ("cross product of (1,0,0) and (0,1,0)", "vector_operation"),
    ("What is the magnitude of the vector (3,4)?", "vector_operation"),
    ("Find the electric field of two point charges", "run_simulation"),
    ("Magnetic field of a wire carrying 2 A at 5 cm", "run_simulation"),
    ("Simulate a pulse on a string", "run_simulation"),
    ("Potential inside a box with the top at 100 V", "run_simulation"),
]


@pytest.fixture(scope="module")
def encoder(query_precision: str) -> Encoder:
    return load_encoder(RetrieverConfig(device="cpu", onnx_query_precision=query_precision))


@pytest.fixture(scope="module")
def index(encoder: Encoder) -> ToolIndex:
    config = RetrieverConfig()
    documents = catalog_documents(builtin_tools(), config)
    vectors = embed_documents(encoder, [d.text for d in documents], progress=False)
    return ToolIndex(documents, vectors, lexical=config.fusion, rrf_k=config.rrf_k)


@pytest.mark.parametrize(("request_text", "tool"), REQUESTS)
def test_the_right_built_in_tool_ranks_first(
    encoder: Encoder, index: ToolIndex, request_text: str, tool: str
) -> None:
    vector = encoder.encode([request_text])[0]
    hits = index.search(vector, request_text, 3, method="hybrid")
    assert hits[0].name == tool
