"""The Beta posterior over the offline edge trust: no traffic keeps today's evidence
exactly, a few requests move it little, many move it far, failures lower it."""

from __future__ import annotations

import math

import pytest

from proxy.learning.evidence import ObservedEdges
from proxy.learning.feedback import Count, Key

N = 260  # tools in the catalog
OFFLINE = math.log(35.0)  # an informative edge: 35 times the odds of a random tool


def edges(counts: dict[Key, Count], strength: float = 10.0) -> ObservedEdges:
    return ObservedEdges(counts, strength)


def test_a_tool_the_tenant_never_ran_keeps_its_offline_evidence_exactly() -> None:
    seen = edges({("edge", "a", "b"): (3, 0), ("pick", "x", "y"): (9, 0)})
    assert seen.nats("x", "y", OFFLINE, N, 1.0) == OFFLINE  # picks are no edge evidence
    assert seen.nats("c", "d", 0.0, N, 1.0) == 0.0
    assert seen.successors("x") == ()


def test_successes_raise_an_edge_and_a_few_move_it_little() -> None:
    one = edges({("edge", "a", "b"): (1, 0)}).nats("a", "b", OFFLINE, N, 1.0)
    many = edges({("edge", "a", "b"): (100, 0)}).nats("a", "b", OFFLINE, N, 1.0)
    assert OFFLINE < one < OFFLINE + 0.5 < many
    assert many == pytest.approx(math.log(N * (10 * 35 / N + 100) / 110))


def test_traffic_that_goes_elsewhere_lowers_an_edge_but_never_below_zero() -> None:
    seen = edges({("edge", "a", "c"): (3, 0)})
    assert 0 < seen.nats("a", "b", OFFLINE, N, 1.0) < OFFLINE
    assert edges({("edge", "a", "c"): (500, 0)}).nats("a", "b", OFFLINE, N, 1.0) == 0.0


def test_failures_lower_an_edge() -> None:
    failed = edges({("edge", "a", "b"): (0, 5)}).nats("a", "b", OFFLINE, N, 1.0)
    assert 0 < failed < OFFLINE


def test_an_observed_pair_the_graph_lacks_gains_evidence_from_nothing() -> None:
    seen = edges({("edge", "a", "b"): (20, 0)})
    assert seen.successors("a") == ["b"]
    assert seen.nats("a", "b", 0.0, N, 1.0) > OFFLINE


def test_an_edge_out_of_a_pick_that_may_be_wrong_weighs_less() -> None:
    counts: dict[Key, Count] = {("edge", "a", "b"): (20, 0)}
    sure, discounted = 0.272, math.log(0.272 * 35 + 1 - 0.272)
    assert edges({}).nats("a", "b", discounted, N, sure) == discounted
    assert (
        0 < edges(counts).nats("a", "b", 0.0, N, sure) < edges(counts).nats("a", "b", 0.0, N, 1.0)
    )
    # no traffic out of "a" other than to "b": the discount undone, then applied again
    one = edges({("edge", "a", "b"): (1, 0)}).nats("a", "b", discounted, N, sure)
    assert one == pytest.approx(math.log(sure * N * (10 * 35 / N + 1) / 11 + 1 - sure))


def test_the_prior_strength_decides_how_far_the_same_traffic_moves_an_edge() -> None:
    counts: dict[Key, Count] = {("edge", "a", "b"): (5, 0)}
    weak = edges(counts, strength=1.0).nats("a", "b", 0.0, N, 1.0)
    strong = edges(counts, strength=100.0).nats("a", "b", 0.0, N, 1.0)
    assert strong < weak
