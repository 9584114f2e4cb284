"""Writing a BERT-like encoder as one ONNX graph: tokens in, pooled and normalised vectors out.

The export runs once per model, precision and onnxruntime release, from the weights on
disk (never a download), and :mod:`retriever.onnx_encoder` keeps the file. It needs torch,
transformers and the ``onnx`` package; serving the file needs onnxruntime alone.

Three steps, each measured (retriever/README.md, "Latency"):

* the network is traced with eager attention (torch's SDPA traces to loose ops that
  onnxruntime's fusions do not recognise) and mean or CLS pooling plus the L2 norm
  inside the graph, so a query is one ``run`` call;
* onnxruntime's transformer optimizer fuses attention, the embedding layer norm and
  GELU (the fused graph ran about 1.2-1.3x the unfused one on this machine);
* ``fp16`` converts the weights (inputs and outputs stay int64 / float32); ``int8``
  quantizes the matrix products dynamically, per output channel (per tensor lost
  another 0.06 of cosine).
"""

from __future__ import annotations

import os
import tempfile
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import torch

    from retriever.delta import WeightDelta

Precision = Literal["fp32", "fp16", "int8"]

#: Inputs of the exported graph, in this order.
INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def export_onnx(
    model: Path,
    pooling: str,
    precision: Precision,
    target: Path,
    delta: WeightDelta | None = None,
) -> None:
    """Write ``model``'s graph, with the fine-tuned ``delta`` added to its weights, to
    ``target`` (atomically: a reader sees the old file, none, or the whole new one, and
    two processes exporting at once both succeed)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".export-") as folder:
        traced = Path(folder) / "traced.onnx"
        _trace(model, pooling, traced, delta)
        optimized = Path(folder) / "optimized.onnx"
        _optimize(traced, optimized, model)
        final = Path(folder) / "final.onnx"
        _convert(optimized, final, precision)
        os.replace(final, target)


def _trace(model: Path, pooling: str, out: Path, delta: WeightDelta | None) -> None:
    from transformers import AutoModel

    network = AutoModel.from_pretrained(str(model), attn_implementation="eager").eval()
    if delta is not None:
        delta.apply(network)
    trace_graph(pooled(network, pooling), model, out, "vectors", {0: "batch"})


def trace_graph(
    module: torch.nn.Module, model: Path, out: Path, output: str, output_axes: dict[int, str]
) -> None:
    """``module`` (it takes :data:`INPUTS`) traced on two texts of ``model``'s tokenizer and
    written to ``out`` as ONNX: every input's batch and token axes dynamic, and the one
    output's ``output_axes``."""
    import torch
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model))
    sample = tokenizer(["a short text", "a longer text that pads the first"], padding=True)
    args = tuple(torch.tensor(sample[name]) for name in INPUTS)
    axes = {name: {0: "batch", 1: "tokens"} for name in INPUTS}
    # The legacy exporter is chosen on purpose (see dynamo= below) and says it is deprecated;
    # the tracer warns about transformers' shape checks, which hold for every input here (the
    # mask is always as long as the tokens, and it is always given). The result is checked
    # against torch's vectors by the tests, not by these warnings.
    with torch.inference_mode(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            module,
            args,
            str(out),
            input_names=list(INPUTS),
            output_names=[output],
            dynamic_axes={**axes, output: output_axes},
            opset_version=17,
            dynamo=False,  # the torch.export path needs onnxscript and gains nothing here
        )


def _optimize(source: Path, out: Path, model: Path) -> None:
    import json

    from onnxruntime.transformers.optimizer import optimize_model

    config = json.loads((model / "config.json").read_text())
    optimized = optimize_model(
        str(source),
        model_type="bert",
        num_heads=int(config["num_attention_heads"]),
        hidden_size=int(config["hidden_size"]),
    )
    optimized.save_model_to_file(str(out))


def _convert(source: Path, out: Path, precision: Precision) -> None:
    if precision == "fp32":
        os.replace(source, out)
    elif precision == "fp16":
        import onnx
        from onnxruntime.transformers.float16 import convert_float_to_float16

        half = convert_float_to_float16(onnx.load(str(source)), keep_io_types=True)
        onnx.save(half, str(out))
    else:
        from onnxruntime.quantization import QuantType, quantize_dynamic

        quantize_dynamic(
            str(source),
            str(out),
            weight_type=QuantType.QInt8,
            per_channel=True,
            # The fused graph's contrib ops defeat shape inference; their outputs are float.
            extra_options={"DefaultTensorType": 1},
        )


def pooled(network: torch.nn.Module, pooling: str | None) -> torch.nn.Module:
    """``network`` followed by FlagModel's pooling and the L2 norm, as one module; with
    no ``pooling``, its last hidden states (what the fine-tuning's lower layers keep)."""
    import torch

    class Pooled(torch.nn.Module):
        def __init__(self, network: torch.nn.Module, pooling: str | None) -> None:
            super().__init__()
            self.network = network
            self.pooling = pooling

        def forward(
            self,
            input_ids: torch.Tensor,
            attention_mask: torch.Tensor,
            token_type_ids: torch.Tensor,
        ) -> torch.Tensor:
            hidden: torch.Tensor = self.network(
                input_ids=input_ids,
                attention_mask=attention_mask,
                token_type_ids=token_type_ids,
            ).last_hidden_state
            if self.pooling is None:
                return hidden
            if self.pooling == "cls":
                pooled = hidden[:, 0]
            else:
                mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1)
            return torch.nn.functional.normalize(pooled, dim=-1)

    return Pooled(network, pooling)
