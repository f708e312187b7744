"""A sentence-transformers BERT folder as an ONNX graph, built from its own weights.

The graph is made in memory from ``config.json`` and ``model.safetensors`` each
time the embedder loads (tens of milliseconds): no converted file is kept, so
the weights are on disk once, and neither torch nor an exporter is needed.  It
computes what sentence-transformers computes for all-MiniLM-L6-v2: the BERT
encoder (absolute positions, token type 0, GELU with erf), mean pooling over
the attention mask and L2 normalisation.  ``tests/test_embedder.py`` holds it to
vectors made by sentence-transformers itself.
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from assistant.base.errors import ModelError

OPSET = 17  # LayerNormalization
IR_VERSION = 8  # what opset 17 needs: older runtimes still load it

_DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64}


def read_safetensors(path: Path) -> dict[str, NDArray[Any]]:
    """Every tensor of a safetensors file (the format is a length, a JSON header, raw data)."""
    data = path.read_bytes()
    try:
        (size,) = struct.unpack("<Q", data[:8])
        header = json.loads(data[8 : 8 + size])
    except (struct.error, ValueError) as exc:
        raise ModelError(f"{path} is not a safetensors file: {exc}") from None
    start = 8 + size
    out: dict[str, NDArray[Any]] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = _DTYPES.get(info.get("dtype"))
        if dtype is None:
            raise ModelError(f"{path}: tensor {name} has unsupported dtype {info.get('dtype')}")
        begin, end = info["data_offsets"]
        array = np.frombuffer(
            data, dtype=dtype, count=(end - begin) // np.dtype(dtype).itemsize, offset=start + begin
        )
        out[name] = array.reshape(info["shape"])
    return out


@dataclass(frozen=True)
class BertShape:
    hidden: int
    heads: int
    layers: int
    eps: float

    @classmethod
    def of(cls, config: dict[str, Any]) -> BertShape:
        if config.get("model_type") != "bert":
            raise ModelError(
                f"only BERT embedders run on ONNX Runtime here, not {config.get('model_type')!r}"
            )
        if (
            config.get("hidden_act", "gelu") != "gelu"
            or config.get("position_embedding_type", "absolute") != "absolute"
        ):
            raise ModelError("only BERT with GELU and absolute positions runs on ONNX Runtime here")
        return cls(
            hidden=int(config["hidden_size"]),
            heads=int(config["num_attention_heads"]),
            layers=int(config["num_hidden_layers"]),
            eps=float(config.get("layer_norm_eps", 1e-12)),
        )


def build(folder: Path) -> bytes:
    """The serialized ONNX model of the sentence-transformers folder ``folder``.

    Inputs ``input_ids`` and ``attention_mask`` (int64, batch x tokens); output
    ``embeddings`` (float32, batch x hidden, unit length)."""
    try:
        from onnx import TensorProto, helper, numpy_helper
    except ImportError as exc:  # pragma: no cover - a broken install
        raise ModelError(f"the onnx package is not installed: {exc}") from None
    try:
        config = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError) as exc:
        raise ModelError(f"cannot read {folder / 'config.json'}: {exc}") from None
    shape = BertShape.of(config)
    pooling = folder / "1_Pooling" / "config.json"
    if pooling.is_file() and not json.loads(pooling.read_text()).get("pooling_mode_mean_tokens"):
        raise ModelError("only mean pooling runs on ONNX Runtime here")
    weights_file = folder / "model.safetensors"
    if not weights_file.is_file():
        raise ModelError(f"{weights_file} is missing")
    w = read_safetensors(weights_file)
    head_dim = shape.hidden // shape.heads

    inits: list[Any] = []
    nodes: list[Any] = []

    def const(name: str, array: NDArray[Any]) -> str:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def weight(name: str) -> NDArray[Any]:
        try:
            return w[name]
        except KeyError:
            raise ModelError(f"{weights_file} has no tensor {name}") from None

    def node(op: str, inputs: list[str], name: str, **attrs: Any) -> str:
        nodes.append(helper.make_node(op, inputs, [name], name=name, **attrs))
        return name

    def linear(x: str, prefix: str, out: str) -> str:
        kernel = const(prefix + ".wT", weight(prefix + ".weight").astype(np.float32).T)
        bias = const(prefix + ".b", weight(prefix + ".bias").astype(np.float32))
        return node("Add", [node("MatMul", [x, kernel], out + ".mm"), bias], out)

    def layer_norm(x: str, prefix: str, out: str) -> str:
        gamma = const(prefix + ".g", weight(prefix + ".weight").astype(np.float32))
        beta = const(prefix + ".b", weight(prefix + ".bias").astype(np.float32))
        return node("LayerNormalization", [x, gamma, beta], out, axis=-1, epsilon=shape.eps)

    # Embeddings: word + position + token type 0.
    e = "embeddings"
    words = node("Gather", [const("word", weight(e + ".word_embeddings.weight")), "input_ids"], "w")
    seq = node("Shape", ["input_ids"], "seq", start=1, end=2)  # [tokens], a 1-D tensor
    table = const("pos", weight(e + ".position_embeddings.weight"))
    starts = const("zero", np.array([0], dtype=np.int64))
    pos = node("Slice", [table, starts, seq, starts], "p")  # rows 0..tokens-1 of axis 0
    type0 = const("type0", weight(e + ".token_type_embeddings.weight")[0].astype(np.float32))
    x = node("Add", [node("Add", [words, pos], "wp"), type0], "emb")
    x = layer_norm(x, e + ".LayerNorm", "h0")

    # The attention mask as an additive bias, batch x 1 x 1 x tokens.
    maskf = node("Cast", ["attention_mask"], "maskf", to=TensorProto.FLOAT)
    mask4 = node("Unsqueeze", [maskf, const("axes12", np.array([1, 2], dtype=np.int64))], "mask4")
    one = const("onef", np.array(1.0, dtype=np.float32))
    inverted = node("Sub", [one, mask4], "inv")
    bias = node("Mul", [inverted, const("neg", np.array(-1e9, dtype=np.float32))], "mask_bias")

    split = const("split_heads", np.array([0, 0, shape.heads, head_dim], dtype=np.int64))
    merge = const("merge_heads", np.array([0, 0, shape.hidden], dtype=np.int64))
    scale = const("scale", np.array(1.0 / math.sqrt(head_dim), dtype=np.float32))
    sqrt2 = const("sqrt2", np.array(math.sqrt(2.0), dtype=np.float32))
    half = const("half", np.array(0.5, dtype=np.float32))

    def heads(x: str, prefix: str, out: str, perm: list[int]) -> str:
        """A projection split into heads: batch x heads x tokens x dim (as ``perm`` orders)."""
        parts = node("Reshape", [linear(x, prefix, out), split], out + ".split")
        return node("Transpose", [parts], out + ".t", perm=perm)

    for i in range(shape.layers):
        p = f"encoder.layer.{i}"
        n = f"l{i}"

        q = heads(x, f"{p}.attention.self.query", f"{n}.q", [0, 2, 1, 3])
        k = heads(x, f"{p}.attention.self.key", f"{n}.k", [0, 2, 3, 1])  # transposed for q.k
        v = heads(x, f"{p}.attention.self.value", f"{n}.v", [0, 2, 1, 3])
        scores = node("Mul", [node("MatMul", [q, k], f"{n}.qk"), scale], f"{n}.scaled")
        probs = node("Softmax", [node("Add", [scores, bias], f"{n}.masked")], f"{n}.probs", axis=-1)
        context = node(
            "Transpose", [node("MatMul", [probs, v], f"{n}.ctx")], f"{n}.ctx.t", perm=[0, 2, 1, 3]
        )
        merged = node("Reshape", [context, merge], f"{n}.ctx.merged")
        attended = linear(merged, f"{p}.attention.output.dense", f"{n}.attn")
        x = layer_norm(
            node("Add", [attended, x], f"{n}.res1"), f"{p}.attention.output.LayerNorm", f"{n}.h1"
        )
        inner = linear(x, f"{p}.intermediate.dense", f"{n}.inner")
        erf = node("Erf", [node("Div", [inner, sqrt2], f"{n}.div")], f"{n}.erf")
        gelu = node(
            "Mul",
            [
                node("Mul", [inner, half], f"{n}.halfx"),
                node("Add", [erf, one], f"{n}.erf1"),
            ],
            f"{n}.gelu",
        )
        out = linear(gelu, f"{p}.output.dense", f"{n}.out")
        x = layer_norm(node("Add", [out, x], f"{n}.res2"), f"{p}.output.LayerNorm", f"{n}.h2")

    # Mean over the real tokens, then unit length.
    mask3 = node("Unsqueeze", [maskf, const("axis2", np.array([2], dtype=np.int64))], "mask3")
    axis1 = const("axis1", np.array([1], dtype=np.int64))
    summed = node("ReduceSum", [node("Mul", [x, mask3], "masked_h"), axis1], "summed", keepdims=0)
    counts = node("ReduceSum", [mask3, axis1], "counts", keepdims=0)
    counts = node("Max", [counts, const("min_count", np.array(1e-9, np.float32))], "counts_min")
    mean = node("Div", [summed, counts], "mean")
    norm = node("ReduceL2", [mean], "norm", axes=[-1], keepdims=1)  # axes: an attribute in 17
    norm = node("Max", [norm, const("min_norm", np.array(1e-12, np.float32))], "norm_min")
    node("Div", [mean, norm], "embeddings")

    graph = helper.make_graph(
        nodes,
        "sentence-embedder",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "tokens"]),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "tokens"]),
        ],
        [helper.make_tensor_value_info("embeddings", TensorProto.FLOAT, ["batch", shape.hidden])],
        initializer=inits,
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET)],
        producer_name="drag-assistant",
        ir_version=IR_VERSION,
    )
    return bytes(model.SerializeToString())
