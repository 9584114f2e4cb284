"""The learned gate: does any tool of this catalog serve this request?

A small network (``weights.json``, shipped in the package and read offline) maps the
request's :mod:`~retriever.gate.features` to the probability that a tool is needed;
at or above ``threshold`` the request goes to the tools. An empty catalog needs no
model: no tool can serve, score 0. The weights were fitted on the query vectors of
one encoder (named in the file) and mean nothing with another: ``encoder_choice`` says
which, the bundled all-MiniLM-L6-v2 as it is (``bundled``) or the retriever's default
encoder with its learned adapter (``default``), and :func:`gate_encoder_config` names
that encoder whatever the retriever is configured with.

Which weights the proxy loads is its ``retriever.gate_weights`` setting
(:func:`configured_gate`). Retrain with ``python -m retriever.gate`` (see retriever/README.md).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from retriever.config import GateWeightsName, RetrieverConfig
from retriever.embedder import Vectors, bundled_model_path
from retriever.errors import ModelNotFound
from retriever.gate.background import COVERAGE
from retriever.gate.features import SCALARS, CatalogView, scalar_features

#: The shipped weights, next to this module.
WEIGHTS = Path(__file__).with_name("weights.json")
#: A gate that also reads the catalog's background and cutoff (``background.py``,
#: ``cutoff.py``): measured, not the default (retriever/gate/README.md says why).
COVERAGE_WEIGHTS = Path(__file__).with_name("weights_coverage.json")
#: The files ``RetrieverConfig.gate_weights`` names.
NAMED_WEIGHTS: dict[GateWeightsName, Path] = {"shipped": WEIGHTS, "coverage": COVERAGE_WEIGHTS}

Array = npt.NDArray[np.float64]
#: Which encoder a gate reads: the bundled MiniLM without adapter, or the retriever's
#: default encoder (its settings' defaults, adapter included), whatever is configured.
EncoderChoice = Literal["bundled", "default"]


class Layer(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    weight: list[list[float]]  # inputs x outputs
    bias: list[float]


class GateFile(BaseModel):
    """``weights.json``: what was fitted, on what, and the threshold chosen."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    encoder: str
    encoder_choice: EncoderChoice = "bundled"
    scalars: list[str]
    mean: list[float]
    scale: list[float]
    layers: list[Layer] = Field(min_length=1)
    #: Orchestrate mode's, the balanced rule's (``retriever.gate.train.RULES``): the best
    #: balanced accuracy on tool against no tool, keeping 95 % of tool requests.
    threshold: float = Field(ge=0, le=1)
    #: Orchestrate mode's with the upstream's triage on (``plan.triage``): the gate refuses
    #: only below this (99 % of tool requests kept) and the triage call sorts the rest.
    confident_threshold: float = Field(ge=0, le=1)
    #: Select mode's opt-in gate (``toolgraph.gate``): the best mean-accuracy rule's, since
    #: the client asked to have its tools dropped when none serves.
    opt_in_threshold: float = Field(ge=0, le=1)
    #: The catalog's cutoff (:mod:`~retriever.gate.cutoff`): at its balanced or opt-in
    #: threshold a request needs a tool only if it also scores this quantile of the bank's
    #: requests against the same catalog. None: no cutoff (the threshold alone).
    bank_quantile: float | None = Field(default=None, gt=0, lt=1)
    #: How far over the bank's quantile score the cutoff sits, in log-odds (0: at it).
    bank_margin: float = Field(default=0.0, ge=0)
    trained_on: list[str]
    seed: int


@dataclass(frozen=True, slots=True)
class Decision:
    needs_tool: bool
    score: float  # the probability that a tool is needed
    threshold: float | None = None  # what it was decided at (None: by rule, no catalog)

    @property
    def label(self) -> str:
        """What the trace shows: ``tool`` or ``no_tool``."""
        return "tool" if self.needs_tool else "no_tool"


#: The scalar lists a gate may read: the base ones, or those and the coverage ones.
READABLE = (list(SCALARS), [*SCALARS, *COVERAGE])


class Gate:
    """A loaded gate; :meth:`decide` is pure numpy (a few microseconds)."""

    def __init__(
        self, spec: GateFile, threshold: float | None = None, *, cutoff: bool = True
    ) -> None:
        """``cutoff``: whether the catalog's cutoff applies at ``threshold`` (not at the
        confident one, where the planner's triage sorts the band)."""
        if spec.scalars not in READABLE:
            raise ModelNotFound(f"gate weights read features {spec.scalars}, not {READABLE}")
        self.spec = spec
        #: Whether it reads the catalog's background (:mod:`~retriever.gate.background`):
        #: its catalogs must then carry one.
        self.reads_coverage = len(spec.scalars) > len(SCALARS)
        #: Whether its decisions read a catalog's cutoff (:mod:`~retriever.gate.cutoff`).
        self.cuts = cutoff and spec.bank_quantile is not None
        self.threshold = spec.threshold if threshold is None else threshold
        self._mean = np.asarray(spec.mean)
        self._scale = np.asarray(spec.scale)
        self._layers = [(np.asarray(x.weight), np.asarray(x.bias)) for x in spec.layers]

    @property
    def encoder(self) -> str:
        return self.spec.encoder

    def encoder_config(self, config: RetrieverConfig) -> RetrieverConfig:
        """The encoder this gate reads (:func:`gate_encoder_config`), on ``config``'s device."""
        return gate_encoder_config(config, self.spec.encoder_choice)

    def probability(self, scalars: Array, query_vectors: Array) -> Array:
        """Batched: one row of scalars and one query vector per request (columns past
        those this gate reads are ignored: a design's coverage scalars, say)."""
        read = scalars[:, : len(self._mean)]
        hidden = np.hstack([(read - self._mean) / self._scale, query_vectors])
        for weight, bias in self._layers[:-1]:
            hidden = np.maximum(hidden @ weight + bias, 0.0)
        weight, bias = self._layers[-1]
        logits = (hidden @ weight + bias)[:, 0]
        probability: Array = 1.0 / (1.0 + np.exp(-np.clip(logits, -30, 30)))
        return probability

    def decide(
        self,
        query_vector: Vectors,
        query_text: str,
        catalog: CatalogView,
        threshold: float | None = None,
        cutoff: float = 0.0,
    ) -> Decision:
        """Whether ``catalog`` holds a tool for the request, at ``threshold`` (None: this
        gate's own, raised to ``cutoff``, the catalog's, where this gate :attr:`cuts`)."""
        if not len(catalog):
            return Decision(False, 0.0)
        at = self.threshold if threshold is None else threshold
        if threshold is None and self.cuts:
            at = max(at, cutoff)
        scalars = scalar_features(query_vector, query_text, catalog, coverage=self.reads_coverage)[
            None, :
        ]
        score = float(self.probability(scalars, query_vector.astype(np.float64)[None, :])[0])
        return Decision(score >= at, round(score, 4), at)


#: Which of the file's thresholds a gate decides at: ``balanced`` (orchestrate mode's),
#: ``confident`` (orchestrate mode's under triage: refuse only when sure), ``opt_in``
#: (select mode's, when the client asked for the gate).
ThresholdChoice = Literal["balanced", "confident", "opt_in"]


def load_gate(path: Path = WEIGHTS, *, at: ThresholdChoice = "balanced") -> Gate:
    """The gate in ``path`` (the shipped one by default) at the threshold ``at`` names;
    :class:`ModelNotFound` if unreadable."""
    try:
        spec = GateFile.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, ValidationError) as exc:
        raise ModelNotFound(f"cannot read the gate's weights at {path}: {exc}") from None
    thresholds = {
        "balanced": spec.threshold,
        "confident": spec.confident_threshold,
        "opt_in": spec.opt_in_threshold,
    }
    return Gate(spec, thresholds[at], cutoff=at != "confident")


def weights_path(choice: GateWeightsName | Path) -> Path:
    """The file a ``gate_weights`` value names: a name's file of :data:`NAMED_WEIGHTS`, or
    the path itself."""
    return choice if isinstance(choice, Path) else NAMED_WEIGHTS[choice]


def configured_gate(config: RetrieverConfig, *, at: ThresholdChoice = "balanced") -> Gate:
    """The gate ``config.gate_weights`` names (:func:`load_gate`); :class:`ModelNotFound`
    naming the setting if its file is unreadable."""
    try:
        return load_gate(weights_path(config.gate_weights), at=at)
    except ModelNotFound as exc:
        raise ModelNotFound(f"retriever.gate_weights: {exc}") from None


def gate_encoder_config(
    config: RetrieverConfig, choice: EncoderChoice = "bundled"
) -> RetrieverConfig:
    """The encoder a gate of ``choice`` was fitted with, on ``config``'s device: the
    bundled MiniLM without the retrieval adapter, or the retriever's default encoder
    (not ``config``'s model: a gate fitted on the default serves any configuration)."""
    if choice == "default":
        return RetrieverConfig(
            device=config.device, cpu_threads=config.cpu_threads, runtime=config.runtime
        )
    return RetrieverConfig(
        model_path=bundled_model_path(),
        model_kind="flag",
        pooling="mean",
        adapter=False,
        device=config.device,
        cpu_threads=config.cpu_threads,
    )
