"""An int8 variant of a model's graph, derived from its float32 graph.

``onnxruntime.quantization.quantize_dynamic`` stores the weights of the matrix
products (and the word-embedding table) as 8-bit integers and quantises activations as
they come. Measured on all-MiniLM-L6-v2 over 200 varied texts, each run alone (cosine
of each int8 vector to the float32 one), on an AVX2 CPU without VNNI:

==========================================  =======  ==========  ============
settings                                    size     min cosine  median
==========================================  =======  ==========  ============
QInt8, the defaults                         22.7 MB  0.851       0.964
QUInt8 per channel                          22.8 MB  0.982       0.994
QUInt8 per channel, FFN down-projections    33.4 MB  0.988       0.997
kept in float32 (kept here)
QUInt8 per channel, MatMul only             58.6 MB  0.982       0.994
==========================================  =======  ==========  ============

The feed-forward down-projections take the GELU's long-tailed output, which 8 bits
resolve worst; keeping those six products in float32 halves the loss for 11 MB.
``reduce_range`` was worse (0.53 in an earlier trial). The activations' scale is one per
tensor, over a whole batch and its padding, so the embedder runs an int8 model one text
at a time (:meth:`~kg_fuse.server.embedding.embedder.Embedder.encode`): in a batch, the
same text's vector moved by up to cosine 0.969. Vectors of the int8 variant are not those
of the float32 model: a store embedded by one is not searched with the other.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Iterator
from pathlib import Path

log = logging.getLogger(__name__)

#: Bumped whenever the settings change: a new file name.
QUANT_RECIPE = "quint8-pc-ffn32-v1"


def _quiet(record: logging.LogRecord) -> bool:
    """False for the quantiser's own notes, which it logs on the root logger at INFO (a
    line per tensor) and WARNING (advice on pre-processing, which changes nothing here)."""
    return "onnxruntime" not in record.pathname or record.levelno >= logging.ERROR


@contextlib.contextmanager
def _quantiser_quiet() -> Iterator[None]:
    root = logging.getLogger()
    root.addFilter(_quiet)
    try:
        yield
    finally:
        root.removeFilter(_quiet)


def write_int8(source: Path, target: Path, kept_float: str) -> None:
    """Quantise the float32 graph at ``source`` into ``target`` (a temporary name),
    leaving the products whose node names match ``kept_float`` (the family's feed-forward
    down-projections: :attr:`Family.kept_float`) in float32."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from kg_fuse.server.embedding.runtime import import_onnxruntime

    import_onnxruntime()  # telemetry off before the quantiser imports the runtime
    model = onnx.load(str(source))
    kept = [node.name for node in model.graph.node if re.fullmatch(kept_float, node.name)]
    del model
    with _quantiser_quiet():
        quantize_dynamic(str(source), str(target), per_channel=True,
                         weight_type=QuantType.QUInt8, nodes_to_exclude=kept)
    log.info("quantised %s (%d products kept in float32)", source.name, len(kept))
