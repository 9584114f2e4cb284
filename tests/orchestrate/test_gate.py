"""The no-tool gate in orchestrate mode, on by default, through the SDK: a request no
tool serves is answered without planning; one a tool serves is planned as before."""

from __future__ import annotations

from typing import Any

import pytest

from proxy.config import load_settings
from proxy.orchestrate.pipeline import SURE_BANK_QUANTILE, SURE_OF_A_TOOL, sure_of_a_tool
from proxy.plan.planner import UNTRIAGED
from proxy.tools.packs.math.catalog import builtin_tools
from retriever.documents import tool_fields
from retriever.embedder import load_encoder
from retriever.gate.catalog import CatalogGate
from retriever.gate.features import gate_document
from retriever.gate.model import COVERAGE_WEIGHTS, Decision, load_gate
from tests.conftest import ServerThread, StartProxy
from tests.orchestrate.conftest import ORCHESTRATE, Brain, sdk, stream_parts, trace, user
from tests.retriever.test_gate import MARGIN, broad_documents

# On the built-in catalog these two score about 0.02, under the confident threshold
# (0.04) and the balanced one (0.24); the expression 0.99.
CHIT_CHAT = "Thank you!"
GREETING = "Good morning"
QUESTION = "Evaluate the expression 2*pi*50 numerically."
#: The quick start's question, a calculation a model does by heart (c / f): 0.14-0.15,
#: in the uncertain band between the two thresholds (tests/retriever/test_gate.py).
QUICK_START = "What is the wavelength of a 2.4 GHz signal?"
#: Stages only planning and tools ask the upstream about.
PLANNING = ("decompose", "pick", "reflect", "arguments")
#: Seconds the SDK waits: the first request loads the catalog, slow on a busy machine.
WAIT = 300


@pytest.fixture
def gated(start_proxy: StartProxy, monkeypatch: pytest.MonkeyPatch) -> ServerThread:
    """The default settings (the gate on), with the LLM planner, so that a planned
    request shows in the upstream's prompts."""
    monkeypatch.delenv("TOOLGRAPH_ORCHESTRATE__GATE")  # conftest's _no_gate: back to the default
    return start_proxy(planner={"policy": "llm"})


def ask(server: ServerThread, text: str) -> tuple[str, dict[str, Any]]:
    raw = sdk(server, timeout=WAIT).chat.completions.with_raw_response.create(
        model="fake-model", messages=user(text), extra_body=ORCHESTRATE
    )
    answer = raw.parse().choices[0].message.content or ""
    return answer, trace(server, raw.headers["x-toolgraph-trace-id"])


@pytest.mark.parametrize("text", [CHIT_CHAT, GREETING])
def test_chit_chat_is_answered_without_planning(
    gated: ServerThread, brain: Brain, text: str
) -> None:
    answer, recorded = ask(gated, text)
    assert answer == "Answer from the results: none"
    # Nothing to quote: the model gets the client's messages as sent, as passthrough would
    assert brain.prompts == [("answer", text)]
    assert recorded["gate"]["decision"] == "no_tool"
    assert 0 <= recorded["gate"]["score"] < 0.5
    assert "plan" not in recorded
    assert recorded["calls"] == []
    assert "gate" in recorded["timings"]
    assert "plan" not in recorded["timings"]


def test_a_streamed_chit_chat_turn_skips_planning_too(gated: ServerThread, brain: Brain) -> None:
    stream = sdk(gated, timeout=WAIT).chat.completions.create(
        model="fake-model", messages=user(CHIT_CHAT), stream=True, extra_body=ORCHESTRATE
    )
    content, _, _ = stream_parts(iter(stream))
    assert content == "Answer from the results: none"
    assert not any(stage in PLANNING for stage, _ in brain.prompts)


def test_a_tool_request_is_still_planned_and_run(gated: ServerThread, brain: Brain) -> None:
    brain.one_step(QUESTION, "2*pi*50", "evaluate_expression", {"expression": "2*pi*50"})
    answer, recorded = ask(gated, QUESTION)
    assert recorded["gate"]["decision"] == "tool"
    assert recorded["gate"]["score"] >= 0.5
    assert brain.asked["decompose"] == 1
    (call,) = recorded["calls"]
    assert call["tool"] == "evaluate_expression"
    assert call["outcome"] == "ok"
    assert "314.15" in answer


def test_with_the_gate_off_chit_chat_is_planned(start_proxy: StartProxy, brain: Brain) -> None:
    server = start_proxy(planner={"policy": "graph"}, orchestrate={"gate": False})
    _, recorded = ask(server, CHIT_CHAT)
    assert "gate" not in recorded
    assert recorded["plan"]["policy"] == "graph"


def test_without_triage_the_quick_start_question_is_answered_directly(
    gated: ServerThread, brain: Brain
) -> None:
    answer, recorded = ask(gated, QUICK_START)
    assert recorded["gate"]["decision"] == "no_tool"
    assert answer == "Answer from the results: none"
    assert not any(stage in PLANNING for stage, _ in brain.prompts)


def test_a_question_costs_one_forward_pass(
    start_proxy: StartProxy, brain: Brain, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The gate, the planner and the plan memory read the same question: they share
    one pass of the model (a profile found three, the largest part of the plan's time)."""
    monkeypatch.delenv("TOOLGRAPH_ORCHESTRATE__GATE")
    server = start_proxy(planner={"policy": "graph"})
    brain.one_step(QUESTION, "2*pi", "evaluate_expression", {"expression": "2*pi*51"})
    ask(server, QUESTION)  # loads the catalog
    encoder = load_encoder(load_settings().retriever)
    before = encoder.counts.texts

    _, recorded = ask(server, "Evaluate the expression 2*pi*51 numerically.")

    assert recorded["gate"]["decision"] == "tool"
    assert recorded["calls"][0]["outcome"] == "ok"
    assert encoder.counts.texts - before == 1


def test_the_gate_decides_at_its_balanced_threshold(gated: ServerThread, brain: Brain) -> None:
    _, recorded = ask(gated, CHIT_CHAT)
    assert recorded["gate"]["threshold"] == load_gate().threshold


def test_under_triage_the_gate_refuses_only_when_confident(
    start_proxy: StartProxy, brain: Brain, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the upstream's triage on, the gate decides at its confident threshold: small
    talk under it is still answered directly, without the triage call; a request over
    it goes to the triage, which sorts it (here: one call, planned without a
    decomposition): the quick start's question, which it refuses without triage."""
    monkeypatch.delenv("TOOLGRAPH_ORCHESTRATE__GATE")
    server = start_proxy(planner={"policy": "llm", "triage": True})
    _, recorded = ask(server, CHIT_CHAT)
    assert recorded["gate"] == {
        "decision": "no_tool",
        "score": recorded["gate"]["score"],
        "threshold": load_gate(at="confident").threshold,
    }
    assert brain.asked["triage"] == 0

    brain.sort = "one"
    brain.one_step(QUICK_START, "wavelength", "evaluate_expression", {"expression": "3e8/2.4e9"})
    answer, recorded = ask(server, QUICK_START)
    assert recorded["gate"]["decision"] == "tool"
    assert brain.asked["triage"] == 1
    assert brain.asked["decompose"] == 0
    (call,) = recorded["calls"]
    assert call["tool"] == "evaluate_expression"
    assert "0.125" in answer

    # A request of one clause the gate is sure of needs no triage: it is one call
    brain.one_step(QUESTION, "2*pi*50", "evaluate_expression", {"expression": "2*pi*50"})
    answer, recorded = ask(server, QUESTION)
    assert recorded["gate"]["score"] >= SURE_OF_A_TOOL
    assert brain.asked["triage"] == 1
    assert recorded["plan"]["notes"][0] == UNTRIAGED
    assert "314.15" in answer


def test_the_gate_weights_setting_chooses_the_coverage_gate(
    start_proxy: StartProxy, brain: Brain, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under triage the gate decides at its file's confident threshold: the coverage
    gate's (0.03), not the shipped one's (0.04)."""
    monkeypatch.delenv("TOOLGRAPH_ORCHESTRATE__GATE")
    server = start_proxy(
        planner={"policy": "llm", "triage": True}, retriever={"gate_weights": "coverage"}
    )
    brain.sort = "none"
    _, recorded = ask(server, CHIT_CHAT)
    coverage = load_gate(COVERAGE_WEIGHTS, at="confident").threshold
    assert coverage != load_gate(at="confident").threshold
    assert recorded["gate"]["threshold"] == coverage


def test_sure_of_a_tool_is_relative_to_the_catalogs_bank() -> None:
    """In a broad catalog a question a model answers itself scores over 0.8 too ("What is
    a stock market index?" 0.85-0.89 against fifty tools with a stock quote among them):
    the bar rises to the bank's level there, so the triage may still say "none"; on the
    built-in catalog it stays 0.8. That question's score lies within a few hundredths
    of the broad bank's level (0.886 on AVX-512 VNNI), on a side the int8 kernels decide, so the
    rule is checked at a score between the two bars."""
    gate = load_gate()
    encoder = load_encoder(gate.encoder_config(load_settings().retriever))
    documents = [gate_document(tool_fields(t)) for t in builtin_tools()]
    builtin = CatalogGate(gate, encoder, documents)
    broad = CatalogGate(gate, encoder, broad_documents())
    assert builtin.bank_level(SURE_BANK_QUANTILE) < SURE_OF_A_TOOL
    assert broad.bank_level(SURE_BANK_QUANTILE) > SURE_OF_A_TOOL + MARGIN
    knowledge = broad.decide("What is a stock market index?")
    assert knowledge.score >= SURE_OF_A_TOOL + MARGIN
    between = Decision(True, (SURE_OF_A_TOOL + broad.bank_level(SURE_BANK_QUANTILE)) / 2)
    assert not sure_of_a_tool(between, broad)
    assert sure_of_a_tool(between, builtin)
    assert sure_of_a_tool(broad.decide("Find a pharmacy open now near me"), broad)
    assert sure_of_a_tool(builtin.decide(QUESTION), builtin)
