"""The retriever's settings: one frozen model, embedded in toolgraph's ``Settings`` as
its ``retriever`` section and passed down explicitly (the CLI and tests build it too).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal, cast, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator

DocumentVariant = Literal["name_description", "enriched"]
FusionMethod = Literal["scores", "rrf"]
#: The no-tool gate's weights files by name (``retriever.gate.model.NAMED_WEIGHTS``).
GateWeightsName = Literal["shipped", "coverage"]


class RetrieverConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    model_path: Path | None = Field(
        default=None,
        description="Local folder of the embedding model; unset, the bundled all-MiniLM-L6-v2. "
        "Never downloaded: a missing folder stops start-up.",
    )
    adapter: bool = Field(
        default=True,
        description="Map the encoder's vectors through the learned adapter (retriever/README.md, "
        "Learned retrieval); false: the encoder's own vectors.",
    )
    adapter_path: Path | None = Field(
        default=None,
        description="The adapter file: a linear map, or fine-tuned layers added to the weights "
        "(retriever/adapters/minilm-l6-v2-top1.npz, retriever/README.md); unset, the linear map "
        "bundled for all-MiniLM-L6-v2 (used only with the bundled model). A missing or bad file "
        "stops start-up.",
    )
    model_kind: Literal["flag", "bge-m3"] = Field(
        default="flag",
        description="`bge-m3` loads BGE-M3 with BGEM3FlagModel (dense vectors); `flag` any "
        "other encoder with FlagModel.",
    )
    pooling: Literal["mean", "cls"] = Field(
        default="mean", description="Pooling of a `flag` model (mean for MiniLM, cls for BGE)."
    )
    device: Literal["auto", "cpu", "cuda"] = Field(
        default="auto", description="`auto`: CUDA in fp16 when a GPU is present, else CPU."
    )
    cpu_threads: int = Field(
        default=1,
        ge=1,
        le=256,
        description="Threads of one forward pass on CPU (torch or onnxruntime); one keeps a busy "
        "machine's latency steady.",
    )
    runtime: Literal["auto", "onnx", "torch"] = Field(
        default="auto",
        description="What runs a `flag` model on CPU. `auto`: onnxruntime when it is installed "
        "(torch when it is not, or when the export fails), torch on CUDA and for `bge-m3`; "
        "`onnx`: onnxruntime or a start-up error; `torch`: torch always.",
    )
    onnx_precision: Literal["fp32", "fp16", "int8"] = Field(
        default="fp32",
        description="Weights of the ONNX export. `fp32` gives torch's vectors (cosine >= 0.9999); "
        "`int8` is about 1.5-2x faster with cosine about 0.985 and its own cache space; `fp16` is "
        "no faster on CPU (retriever/README.md, Latency).",
    )
    onnx_query_precision: Literal["fp32", "fp16", "int8"] = Field(
        default="int8",
        description="Weights of the ONNX graph that embeds short texts (at most 128 tokens, one "
        "text a run: a request's question and sub-tasks, short tool documents); longer texts use "
        "`onnx_precision`. `int8` took 0.44x of fp32's time for a query on an idle core, NDCG@5 "
        "within 0.5 of fp32's on the training sets (docs/benchmarks.md); the same "
        "value as `onnx_precision` runs one graph for everything.",
    )
    onnx_dir: Path | None = Field(
        default=None,
        description="Folder of the ONNX exports, made once from the local weights "
        "(`toolgraph prepare`, or the first start); unset, `toolgraph/onnx` in the user's "
        "cache folder (`$XDG_CACHE_HOME`, else `~/.cache`), shared by every data folder.",
    )
    batch_window_ms: float = Field(
        default=2.0,
        ge=0,
        le=1000,
        description="How long concurrent queries are gathered into one forward pass.",
    )
    max_batch: int = Field(default=64, ge=1, le=4096, description="Most texts in one pass.")
    cache_size: int = Field(
        default=50_000, ge=0, description="Embeddings kept in the in-process LRU cache."
    )
    cache_ttl_s: int = Field(
        default=7 * 24 * 3600, gt=0, description="Lifetime of an embedding cached in Redis."
    )
    catalog: str = Field(
        default="tools",
        pattern=r"^[A-Za-z0-9_-]{1,64}$",
        description="Name of the catalog's Qdrant collection.",
    )
    document: DocumentVariant = Field(
        default="enriched", description="What is embedded for a tool (see retriever/README.md)."
    )
    fusion: bool = Field(
        default=True, description="Fuse BM25 with the dense ranking (see `fusion_method`)."
    )
    fusion_method: FusionMethod = Field(
        default="scores",
        description="How the dense side and BM25 meet. `scores`: each candidate (the two "
        "rankings' top 100) scores dense_weight x its cosine / the best cosine + the rest x its "
        "BM25 / the best BM25; `rrf`: reciprocal rank fusion of the two rankings. `scores` won "
        "leave-one-dataset-out over the training sets, +2.5 NDCG@5 held out on the mean "
        "(retriever/README.md).",
    )
    rrf_k: int = Field(
        default=60, ge=1, description="Reciprocal rank fusion's constant (`fusion_method: rrf`)."
    )
    bm25_k1: float = Field(
        default=1.5,
        ge=0,
        le=10,
        description="BM25's term-frequency saturation (k1); chosen with the fusion "
        "leave-one-dataset-out (0.9 before).",
    )
    bm25_b: float = Field(
        default=0.75,
        ge=0,
        le=1,
        description="BM25's document-length normalisation (b); chosen with the fusion "
        "leave-one-dataset-out (0.4 before).",
    )
    dense_weight: float = Field(
        default=0.7,
        ge=0,
        le=1,
        description="Share of the dense side in the fusion (BM25 gets the rest): of the scores "
        "with `fusion_method: scores` (0.7, chosen leave-one-dataset-out over the training "
        "sets), of the RRF terms with `rrf` (0.5 is plain RRF; 0.8 was chosen for it). "
        "retriever/README.md.",
    )
    clauses: bool = Field(
        default=True,
        description="Every search (select mode's ranking, orchestrate's catalog searches, the "
        "console's and /mcp's, `toolgraph index search`) also reads each clause of a request "
        "that asks for several things (cut at sentence ends and at ', and', 'and also', "
        "'and then', 'as well as'): a tool scores its best cosine over the whole text and its "
        "clauses; a request of one clause costs what it did. Chosen leave-one-dataset-out "
        "(retriever/clauses.py, retriever/README.md).",
    )
    expand_documents: bool = Field(
        default=False,
        description="Index each catalog tool's 3-4 template questions (written from its name, "
        "description and parameters, no model; retriever/expansion.py) as extra rows beside "
        "its document, a tool's cosine its best row's. Kept in Qdrant (collection "
        "`<catalog>-<model>-questions`) and the index snapshot, embedded only for tools whose "
        "fields changed. Off by default: +0.87 NDCG@5 held out (interval +0.05 to +1.72) for "
        "9 ms more a search over 2,425 tools; docs/benchmarks.md, Retrieval.",
    )
    rerank: bool = Field(
        default=False,
        description="Reorder every hybrid catalog search's top 30 (orchestrate's candidate "
        "lists, the console's and /mcp's search, `toolgraph search`) with the late-interaction "
        "reranker (retriever/rerank/): the query's token vectors against each candidate's, "
        "its MaxSim plus `rerank_first_stage_weight` x the fused score. Select mode does not "
        "rerank. docs/benchmarks.md, Retrieval.",
    )
    rerank_path: Path | None = Field(
        default=None,
        description="The reranker's weights; unset, the file bundled for all-MiniLM-L6-v2 "
        "(retriever/adapters/minilm-l6-v2-rerank.npz). A missing or bad file stops start-up.",
    )
    rerank_first_stage_weight: float = Field(
        default=1.0,
        ge=0,
        le=10,
        description="Share of the first stage's fused score (0-1) added to the reranker's "
        "MaxSim; 1.0 was the best of 0-1 on training-set queries the reranker never read "
        "(docs/benchmarks.md, Retrieval).",
    )
    gate_weights: GateWeightsName | Path = Field(
        default="shipped",
        description="The no-tool gate's weights, for orchestrate mode's gate (`orchestrate.gate`) "
        "and select mode's (`toolgraph.gate`). `shipped`: retriever/gate/weights.json, a "
        "threshold and the catalog's cutoff (a request must also outscore 80 % of a bank of "
        "requests that need no tool against the same catalog; on broad catalogs 0.791-0.956 "
        "accurate where the threshold alone was 0.560-0.769, at a cost in recall on catalogs "
        "such as CLINC150's; docs/benchmarks.md, Gate). `coverage`: weights_coverage.json, "
        "which also reads each catalog's background against that bank as inputs (0.921 "
        "against 0.925 on the left-out tests). Else the path of a file `python -m "
        "retriever.gate --out FILE` wrote; a value that names no file stops start-up.",
    )
    query_turns: int = Field(
        default=3,
        ge=1,
        le=50,
        description="User turns, newest first, that make up the search query.",
    )
    preload: bool = Field(
        default=False,
        description="Load the embedding model at start-up; else on the first select request.",
    )
    select_top_k: int = Field(
        default=8, ge=1, le=512, description="Tools forwarded in select mode (default)."
    )
    select_threshold: float = Field(
        default=0.1,
        ge=-1,
        le=1,
        description="Cosine similarity a tool needs in select mode; the top ones are kept anyway "
        "when none pass.",
    )
    select_fusion: bool = Field(
        default=True,
        description="Select mode orders the client's tools as the catalog's search does: BM25 "
        "fused with the dense ranking (`fusion_method`, `dense_weight`, `bm25_k1`, `bm25_b`; "
        "nothing with `fusion` off), the threshold still read on the cosine; false: by cosine "
        "alone. Recall of the needed tools in the forwarded list, each training set left out: "
        "90.9 -> 91.6 over lists of 50 tools, 86.0 -> 86.9 over lists of up to 300 "
        "(docs/benchmarks.md, Select mode's ranking).",
    )
    select_min_tools: int = Field(
        default=1, ge=1, description="Tools always forwarded in select mode, threshold or not."
    )
    select_keep_loaded: bool = Field(
        default=True,
        description="Within a conversation, select mode keeps the tools it forwarded on earlier "
        "turns, in the order first loaded, and appends new ones, so the forwarded `tools` stays "
        "byte-identical while nothing new is needed (the upstream's prompt cache holds); off, "
        "each turn forwards a fresh selection (proxy/select/loaded.py).",
    )
    select_max_loaded: int = Field(
        default=24,
        ge=1,
        le=512,
        description="Tools a conversation keeps loaded in select mode; past it, the most recently "
        "loaded that the turn did not select go, so the tools before them stay the cached prefix.",
    )
    select_add_per_turn: int = Field(
        default=0,
        ge=0,
        le=512,
        description="With `select_keep_loaded`, how many of a later turn's best-ranked tools may "
        "join the conversation's loaded ones; 0: its whole selection, so a turn forwards a "
        "superset of what a fresh selection would (docs/benchmarks.md, Select mode over a "
        "conversation).",
    )
    select_add_when_needed: bool = Field(
        default=False,
        description="With `select_keep_loaded`, a later turn whose best-ranked tool is already "
        "loaded adds nothing (the forwarded `tools` stays byte-identical); a turn whose best tool "
        "is new adds its selection's new tools (docs/benchmarks.md, Select mode over a "
        "conversation).",
    )
    select_loaded_ttl_s: int = Field(
        default=3600, ge=1, description="How long a conversation's loaded tools are kept idle."
    )
    select_loaded_max_bytes: int = Field(
        default=256 * 1024 * 1024,
        gt=0,
        description="Bytes the conversations' loaded tools hold together, every tenant's (the "
        "oldest written goes first): the most they take of the proxy's memory, or of Redis'.",
    )
    select_loaded_tenant_bytes: int = Field(
        default=32 * 1024 * 1024,
        gt=0,
        description="Bytes one tenant's (one key's) conversations' loaded tools hold together: "
        "past it that tenant's oldest written go, never another tenant's (its conversation's "
        "next turn starts a fresh prefix).",
    )
    enum_top_k: int = Field(
        default=8, ge=1, description="Enum values kept per parameter in select mode."
    )
    enum_min_values: int = Field(
        default=16,
        ge=1,
        description="Enums with at most this many values are left whole.",
    )

    @field_validator("gate_weights", mode="before")
    @classmethod
    def _names_a_gate(cls, value: object) -> GateWeightsName | Path:
        return gate_weights_choice(value)

    def onnx_folder(self) -> Path:
        """``onnx_dir``, or :func:`default_onnx_dir` when unset."""
        return self.onnx_dir or default_onnx_dir()


def default_onnx_dir() -> Path:
    """Where ONNX exports go unless ``onnx_dir`` says: one cache per user and install, shared
    by every data folder (a file's name carries the weights' and onnxruntime's versions, so a
    kept file is never stale), made once by ``toolgraph prepare``. Read when asked, not at
    import: ``$XDG_CACHE_HOME`` is the user's, not a toolgraph setting."""
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "toolgraph" / "onnx"


def gate_weights_choice(value: object) -> GateWeightsName | Path:
    """``value`` read as ``gate_weights`` reads it: a name, or a file (the eval CLIs'
    ``--weights`` too); :class:`ValueError` otherwise, since a misspelt name is no path
    to try at the first request."""
    if value in get_args(GateWeightsName):
        return cast(GateWeightsName, value)
    if isinstance(value, str | Path) and Path(value).is_file():
        return Path(value)
    raise ValueError(
        "must be `shipped`, `coverage` or the path of a gate weights file "
        "(python -m retriever.gate --out FILE)"
    )
