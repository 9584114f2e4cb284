"""The catalog matrix in int8, scored by onnxruntime's integer matrix product.

A float32 matrix-vector product over 47k x 384 reads 73 MB per query and is bound by
memory (about 16 ms here); the int8 copy is a quarter of that, and onnxruntime's
``MatMulInteger`` runs on one thread of its own (no BLAS pool to fight the event loop
for the two cores). numpy has no fast int8 product (its integer matmul took 5x the
float32 one) and neither has torch on CPU, so the product lives in a one-node graph.

Rows are quantized symmetrically with a scale each (largest |value| -> 127) and the
query asymmetrically to uint8 around 128; a row's approximate score is its integer
dot product times its scale. The order is approximate, so :class:`DenseMatrix` takes
a few hundred candidates from it and scores those exactly in float32.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    import onnxruntime

Scores = npt.NDArray[np.float32]

#: The query's uint8 zero point.
_ZERO = 128


class Int8Matrix:
    """Approximate inner products of a float32 matrix's rows with a query."""

    def __init__(self, matrix: npt.NDArray[np.float32]) -> None:
        peak = np.abs(matrix).max(axis=1, keepdims=True).clip(1e-12)
        self._scales: Scores = (peak / 127).astype(np.float32).ravel()
        quantized = np.round(matrix / peak * 127).astype(np.int8)
        self._dim = int(matrix.shape[1])
        self._session = _session(quantized)

    def scores(self, query: npt.NDArray[np.float32]) -> Scores:
        """One approximate score per row, in the rows' order (proportional to the true
        inner product up to rounding: the query's own scale is left out). With several
        query rows (a text and its clauses), one line of scores per query row from one
        pass over the matrix, each line on its own query row's scale."""
        rows = np.atleast_2d(query)
        peak = np.abs(rows).max(axis=1, keepdims=True)
        peak[peak == 0] = 1.0
        quantized = (np.round(rows / peak * 127) + _ZERO).astype(np.uint8)
        (products,) = self._session.run(None, {"query": quantized})
        out: Scores = products.astype(np.float32) * self._scales
        return out[0] if query.ndim == 1 else out


def _session(quantized: npt.NDArray[np.int8]) -> onnxruntime.InferenceSession:
    import onnxruntime
    from onnx import TensorProto, helper, numpy_helper

    rows, dim = quantized.shape
    weights = numpy_helper.from_array(np.ascontiguousarray(quantized.T), "rows")
    zero = numpy_helper.from_array(np.asarray(_ZERO, dtype=np.uint8), "zero")
    graph = helper.make_graph(
        [helper.make_node("MatMulInteger", ["query", "rows", "zero"], ["scores"])],
        "int8_search",
        [helper.make_tensor_value_info("query", TensorProto.UINT8, ["queries", dim])],
        [helper.make_tensor_value_info("scores", TensorProto.INT32, ["queries", rows])],
        [weights, zero],
    )
    # IR 9 with opset 17: what onnxruntime 1.31 reads (onnx 1.23 writes IR 14 by default).
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    # One node: nothing to optimise, and the passes would copy the 18 MB of rows again.
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    return onnxruntime.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
