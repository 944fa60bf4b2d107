"""A BERT-family sentence model as one ONNX graph, made from its weights without torch.

The graph takes the tokenizer's three inputs (``input_ids``, ``attention_mask``,
``token_type_ids``: int64, any batch and any number of tokens) and returns
``sentence_embedding``: the transformer's last hidden state pooled as the folder's
``1_Pooling`` says (mean over the attention mask, or the CLS token) and, when the folder
has a ``Normalize`` module, L2-normalised. It is written with ``onnx.helper`` from the
``model.safetensors`` weights (read with ``safetensors.numpy``) and the ``config.json``
hyper-parameters, so neither torch nor transformers is needed to make it, only to check
it (the tests compare its vectors with sentence-transformers': cosine >= 0.99999).

Each choice below is what the reference computes; what getting one wrong cost, measured
on all-MiniLM-L6-v2 (min cosine to sentence-transformers): tanh GELU instead of erf
0.9999947, LayerNorm epsilon 1e-5 instead of the config's 1e-12 0.9999983, positions
counted from 1 0.43, no token-type embedding 0.16, no attention mask 0.24.

The file is written whole or not at all (:func:`written_once`): to a temporary name
beside its own, flushed to disk and renamed, under a lock, so concurrent first starts
make it once and an interrupted build leaves nothing to be read.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

OPSET = 17
#: Bumped whenever the graph changes (inputs, outputs, pooling, opset): a new file name.
RECIPE = "onnx-helper-v1"
INPUTS = ("input_ids", "attention_mask", "token_type_ids")
OUTPUT = "sentence_embedding"
#: Activations (config.json's ``hidden_act``) the graph writes, as transformers computes them.
ACTIVATIONS = ("gelu", "gelu_new", "gelu_pytorch_tanh", "relu", "silu", "swish")


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """``path``'s lock file (``path.lock``), held exclusively: one process at a time."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def written_once(path: Path, write: Callable[[Path], None]) -> Path:
    """``path``, made by ``write(temporary)`` unless it exists: under a lock (one maker at
    a time; the others find it made), flushed, then renamed into place."""
    with locked(path):
        if path.exists():
            return path
        fd, partial = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.",
                                       suffix=".partial")
        os.close(fd)
        try:
            write(Path(partial))
            with open(partial, "rb") as written:
                os.fsync(written.fileno())
            os.chmod(partial, 0o644)
            os.replace(partial, path)
            directory = os.open(path.parent, os.O_RDONLY)
            try:
                os.fsync(directory)
            finally:
                os.close(directory)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(partial)
    return path


def read_weights(path: Path) -> dict[str, np.ndarray]:
    """The tensors of a safetensors file as float32 arrays, keys without ``bert.``."""
    from safetensors.numpy import load_file

    try:
        tensors = load_file(str(path))
    except TypeError:  # bfloat16, which numpy lacks: widened from the raw bytes
        tensors = _read_bfloat16(path)
    out = {}
    for key, value in tensors.items():
        key = key.removeprefix("bert.")
        # weights converted from TensorFlow name LayerNorm's scale and shift gamma and beta
        key = key.replace("LayerNorm.gamma", "LayerNorm.weight").replace(
            "LayerNorm.beta", "LayerNorm.bias")
        # float16, and bfloat16 where ml_dtypes gives numpy one (dtype kind "V"): widened
        out[key] = value if value.dtype.kind in "iub" else value.astype(np.float32)
    return out


def _read_bfloat16(path: Path) -> dict[str, np.ndarray]:
    """A safetensors file read by its published layout (an 8-byte header length, a JSON
    header, the data), bfloat16 tensors widened to float32."""
    kinds = {"F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32}
    raw = np.memmap(path, dtype=np.uint8, mode="r")
    size = int(np.frombuffer(raw[:8].tobytes(), "<u8")[0])
    header = json.loads(raw[8:8 + size].tobytes())
    out = {}
    for key, info in header.items():
        if key == "__metadata__":
            continue
        start, end = (8 + size + offset for offset in info["data_offsets"])
        data = raw[start:end].tobytes()
        if info["dtype"] == "BF16":
            value = (np.frombuffer(data, "<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            value = np.frombuffer(data, kinds[info["dtype"]])
        out[key] = value.reshape(info["shape"])
    return out


class _Graph:
    """Nodes and initializers with names made unique as they are added."""

    def __init__(self) -> None:
        self.nodes: list[Any] = []
        self.initializers: list[Any] = []
        self._count = 0

    def name(self, hint: str) -> str:
        self._count += 1
        return f"{hint}_{self._count}"

    def const(self, value: Any, hint: str = "const", dtype: Any = np.float32) -> str:
        from onnx import numpy_helper

        name = self.name(hint)
        self.initializers.append(numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
        return name

    def op(self, op_type: str, *inputs: str, node: str | None = None, **attrs: Any) -> str:
        """Add a node; its output's name (``node`` names it, for the int8 variant's choice
        of what to leave in float32)."""
        from onnx import helper

        out = node or self.name(op_type.lower())
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], name=out, **attrs))
        return out


class _Bert:
    """The encoder's layers, written into a :class:`_Graph` from a weights dict."""

    def __init__(self, graph: _Graph, weights: dict[str, np.ndarray],
                 config: dict[str, Any]) -> None:
        self.g = graph
        self.w = weights
        self.hidden = int(config["hidden_size"])
        self.heads = int(config["num_attention_heads"])
        self.layers = int(config["num_hidden_layers"])
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        self.act = str(config.get("hidden_act", "gelu"))

    def weight(self, key: str) -> np.ndarray:
        if key not in self.w:
            raise ValueError(f"the weights lack {key}")
        return self.w[key]

    def linear(self, x: str, prefix: str) -> str:
        """``x @ W.T + b``: torch keeps a linear layer's weight as [out, in]."""
        w = self.g.const(np.ascontiguousarray(self.weight(f"{prefix}.weight").T), "w")
        return self.g.op("Add", self.g.op("MatMul", x, w, node=f"{prefix}.matmul"),
                         self.g.const(self.weight(f"{prefix}.bias"), "b"))

    def norm(self, x: str, prefix: str) -> str:
        return self.g.op("LayerNormalization", x,
                         self.g.const(self.weight(f"{prefix}.weight"), "gamma"),
                         self.g.const(self.weight(f"{prefix}.bias"), "beta"),
                         axis=-1, epsilon=self.eps)

    def activation(self, x: str) -> str:
        g = self.g
        if self.act == "gelu":  # exact: 0.5 x (1 + erf(x / sqrt 2))
            erf = g.op("Erf", g.op("Mul", x, g.const(1 / np.sqrt(2.0))))
            return g.op("Mul", g.op("Mul", x, g.op("Add", erf, g.const(1.0))), g.const(0.5))
        if self.act in ("gelu_new", "gelu_pytorch_tanh"):
            cube = g.op("Mul", g.op("Mul", x, x), x)
            inner = g.op("Mul", g.op("Add", x, g.op("Mul", cube, g.const(0.044715))),
                         g.const(np.sqrt(2.0 / np.pi)))
            return g.op("Mul", g.op("Mul", x, g.op("Add", g.op("Tanh", inner), g.const(1.0))),
                        g.const(0.5))
        if self.act == "relu":
            return g.op("Relu", x)
        return g.op("Mul", x, g.op("Sigmoid", x))  # silu / swish

    def embeddings(self) -> str:
        g = self.g
        words = g.op("Gather", g.const(self.weight("embeddings.word_embeddings.weight"), "words"),
                     "input_ids")
        tokens = g.op("Gather", g.op("Shape", "input_ids"), g.const(1, dtype=np.int64), axis=0)
        positions = g.op("Range", g.const(0, dtype=np.int64), tokens, g.const(1, dtype=np.int64))
        where = g.op("Gather", g.const(self.weight("embeddings.position_embeddings.weight"),
                                       "positions"), positions)
        kinds = g.op("Gather", g.const(self.weight("embeddings.token_type_embeddings.weight"),
                                       "types"), "token_type_ids")
        return self.norm(g.op("Add", g.op("Add", words, kinds), where), "embeddings.LayerNorm")

    def mask_bias(self, mask: str) -> str:
        """0 where a token is attended to, float32's minimum where it is padding:
        [batch, 1, 1, tokens], added to every head's scores."""
        g = self.g
        off = g.op("Sub", g.const(1.0), mask)
        bias = g.op("Mul", off, g.const(np.finfo(np.float32).min))
        return g.op("Unsqueeze", bias, g.const([1, 2], dtype=np.int64))

    def attention(self, x: str, bias: str, prefix: str) -> str:
        g = self.g
        size = self.hidden // self.heads
        split = g.const([0, 0, self.heads, size], dtype=np.int64)
        q, k, v = (g.op("Reshape", self.linear(x, f"{prefix}.self.{part}"), split)
                   for part in ("query", "key", "value"))
        q = g.op("Transpose", q, perm=[0, 2, 1, 3])  # [batch, heads, tokens, size]
        k = g.op("Transpose", k, perm=[0, 2, 3, 1])  # [batch, heads, size, tokens]
        v = g.op("Transpose", v, perm=[0, 2, 1, 3])
        scores = g.op("Add", g.op("Mul", g.op("MatMul", q, k), g.const(size ** -0.5)), bias)
        context = g.op("MatMul", g.op("Softmax", scores, axis=-1), v)
        merged = g.op("Reshape", g.op("Transpose", context, perm=[0, 2, 1, 3]),
                      g.const([0, 0, self.hidden], dtype=np.int64))
        out = self.linear(merged, f"{prefix}.output.dense")
        return self.norm(g.op("Add", out, x), f"{prefix}.output.LayerNorm")

    def layer(self, x: str, bias: str, n: int) -> str:
        prefix = f"encoder.layer.{n}"
        x = self.attention(x, bias, f"{prefix}.attention")
        up = self.activation(self.linear(x, f"{prefix}.intermediate.dense"))
        down = self.linear(up, f"{prefix}.output.dense")
        return self.norm(self.g.op("Add", down, x), f"{prefix}.output.LayerNorm")

    def encode(self, mask: str) -> str:
        """The last hidden state, [batch, tokens, hidden]."""
        x = self.embeddings()
        bias = self.mask_bias(mask)
        for n in range(self.layers):
            x = self.layer(x, bias, n)
        return x


def _pool(g: _Graph, hidden: str, mask: str, pooling: str, normalize: bool) -> str:
    if pooling == "cls":
        pooled = g.op("Gather", hidden, g.const(0, dtype=np.int64), axis=1)
    else:  # mean over the tokens the mask keeps
        weights = g.op("Unsqueeze", mask, g.const([-1], dtype=np.int64))
        axis = g.const([1], dtype=np.int64)
        summed = g.op("ReduceSum", g.op("Mul", hidden, weights), axis, keepdims=0)
        count = g.op("Max", g.op("ReduceSum", weights, axis, keepdims=0), g.const(1e-9))
        pooled = g.op("Div", summed, count)
    if normalize:  # as torch's normalize: x / max(|x|, 1e-12)
        length = g.op("Max", g.op("ReduceL2", pooled, axes=[1], keepdims=1), g.const(1e-12))
        pooled = g.op("Div", pooled, length)
    return pooled


def build_graph(weights_path: Path, config: dict[str, Any], pooling: str,
                normalize: bool, name: str = "sentence-model") -> Any:
    """The ONNX model (``onnx.ModelProto``) of a BERT encoder with its pooling."""
    import onnx
    from onnx import TensorProto, helper

    if config.get("hidden_act", "gelu") not in ACTIVATIONS:
        raise ValueError(f"activation {config.get('hidden_act')!r} is not supported")
    g = _Graph()
    mask = g.op("Cast", "attention_mask", to=TensorProto.FLOAT)
    hidden = _Bert(g, read_weights(weights_path), config).encode(mask)
    pooled = _pool(g, hidden, mask, pooling, normalize)
    g.nodes.append(helper.make_node("Identity", [pooled], [OUTPUT], name=OUTPUT))
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "tokens"])
              for n in INPUTS]
    output = helper.make_tensor_value_info(OUTPUT, TensorProto.FLOAT,
                                           ["batch", int(config["hidden_size"])])
    graph = helper.make_graph(g.nodes, name, inputs, [output], g.initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="kg-fuse", producer_version=RECIPE)
    model.ir_version = min(model.ir_version, 8)  # opset 17's IR: older runtimes read it
    helper.set_model_props(model, {"pooling": pooling, "normalize": str(normalize).lower()})
    onnx.checker.check_model(model)
    return model


def write_graph(target: Path, weights_path: Path, config: dict[str, Any], pooling: str,
                normalize: bool, name: str) -> None:
    """Build the graph and save it to ``target`` (a temporary name: see :func:`written_once`)."""
    import onnx

    model = build_graph(weights_path, config, pooling, normalize, name)
    onnx.save_model(model, str(target))
