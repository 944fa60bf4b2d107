"""The pieces every encoder family's graph is written with: named nodes and constants, and
the layers the families share (linear, LayerNorm, activations, attention).

Each piece computes what transformers computes for it; where the families differ (the
scaling of attention scores, the names of the weights) the family says which.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

#: Activations (config.json's ``hidden_act``) the graph writes, as transformers computes them.
ACTIVATIONS = ("gelu", "gelu_new", "gelu_pytorch_tanh", "relu", "silu", "swish")


class Graph:
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


class Layers:
    """A transformer encoder's shared layers, written into a :class:`Graph` from a
    weights dict (keys without the family's prefix) and ``config.json``."""

    def __init__(self, graph: Graph, weights: dict[str, np.ndarray],
                 config: dict[str, Any]) -> None:
        self.g = graph
        self.w = weights
        self.config = config
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

    def tokens(self) -> str:
        """The number of tokens of the batch (a scalar)."""
        return self.g.op("Gather", self.g.op("Shape", "input_ids"),
                         self.g.const(1, dtype=np.int64), axis=0)

    def offset_positions(self, pad: int) -> str:
        """fairseq's positions, as transformers' ``create_position_ids_from_input_ids``
        makes them: each token that is not ``pad`` counted from ``pad + 1``, padding at
        ``pad``."""
        from onnx import TensorProto

        g = self.g
        kept = g.op("Cast", g.op("Not", g.op("Equal", "input_ids",
                                             g.const(pad, dtype=np.int64))),
                    to=TensorProto.INT64)
        counted = g.op("CumSum", kept, g.const(1, dtype=np.int64))
        return g.op("Add", g.op("Mul", counted, kept), g.const(pad, dtype=np.int64))

    def mask_bias(self, mask: str) -> str:
        """0 where a token is attended to, float32's minimum where it is padding:
        [batch, 1, 1, tokens], added to every head's scores."""
        g = self.g
        off = g.op("Sub", g.const(1.0), mask)
        bias = g.op("Mul", off, g.const(np.finfo(np.float32).min))
        return g.op("Unsqueeze", bias, g.const([1, 2], dtype=np.int64))

    def attention(self, x: str, bias: str, q: str, k: str, v: str, divide: bool = False) -> str:
        """Multi-head attention of ``x`` with ``bias`` added to the scaled scores; the heads'
        context merged back to [batch, tokens, hidden] (before the output projection).
        ``divide``: scores divided by sqrt(head size), as MPNet does, rather than
        multiplied by its inverse, as BERT does."""
        g = self.g
        size = self.hidden // self.heads
        split = g.const([0, 0, self.heads, size], dtype=np.int64)
        q, k, v = (g.op("Reshape", self.linear(x, part), split) for part in (q, k, v))
        q = g.op("Transpose", q, perm=[0, 2, 1, 3])  # [batch, heads, tokens, size]
        k = g.op("Transpose", k, perm=[0, 2, 3, 1])  # [batch, heads, size, tokens]
        v = g.op("Transpose", v, perm=[0, 2, 1, 3])
        raw = g.op("MatMul", q, k)
        scaled = (g.op("Div", raw, g.const(np.sqrt(size))) if divide
                  else g.op("Mul", raw, g.const(size ** -0.5)))
        scores = g.op("Add", scaled, bias)
        context = g.op("MatMul", g.op("Softmax", scores, axis=-1), v)
        return g.op("Reshape", g.op("Transpose", context, perm=[0, 2, 1, 3]),
                    g.const([0, 0, self.hidden], dtype=np.int64))

    def residual(self, x: str, skip: str, dense: str, norm: str) -> str:
        """``LayerNorm(dense(x) + skip)``: every sub-layer's output."""
        return self.norm(self.g.op("Add", self.linear(x, dense), skip), norm)

    def feed_forward(self, x: str, prefix: str) -> str:
        """The feed-forward block of layer ``prefix`` (BERT's names, which MPNet shares)."""
        up = self.activation(self.linear(x, f"{prefix}.intermediate.dense"))
        return self.residual(up, x, f"{prefix}.output.dense", f"{prefix}.output.LayerNorm")
