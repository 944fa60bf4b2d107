"""A sentence model as one ONNX graph, made from its weights without torch.

The graph takes the tokenizer's inputs (``input_ids``, ``attention_mask`` and, for a
family with token types, ``token_type_ids``: int64, any batch and any number of tokens)
and returns ``sentence_embedding``: the transformer's last hidden state pooled as the
folder's ``1_Pooling`` says (mean over the attention mask, or the CLS token) and, when the
folder has a ``Normalize`` module, L2-normalised. It is written with ``onnx.helper`` from
the ``model.safetensors`` weights (read with ``safetensors.numpy``) and the
``config.json`` hyper-parameters, so neither torch nor transformers is needed to make it,
only to check it (the tests compare its vectors with sentence-transformers': cosine >=
0.99999). The encoder's layers are its family's
(:mod:`kg_fuse.server.embedding.families`, chosen once by ``model_type`` when the folder
is read, :mod:`.folder`, and handed here); the pooling and
the file are the same for every family.

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

from kg_fuse.server.embedding.families import ACTIVATIONS, Family, Graph

log = logging.getLogger(__name__)

OPSET = 17
#: Bumped whenever the graph changes (inputs, outputs, pooling, opset): a new file name.
RECIPE = "onnx-helper-v1"
OUTPUT = "sentence_embedding"


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


def read_weights(path: Path, prefix: str) -> dict[str, np.ndarray]:
    """The tensors of a safetensors file as float32 arrays, keys without ``prefix`` (the
    family's: a masked-LM checkpoint puts it before the encoder's keys)."""
    from safetensors.numpy import load_file

    try:
        tensors = load_file(str(path))
    except TypeError:  # bfloat16, which numpy lacks: widened from the raw bytes
        tensors = _read_bfloat16(path)
    out = {}
    for key, value in tensors.items():
        key = key.removeprefix(prefix)
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


def _pool(g: Graph, hidden: str, mask: str, pooling: str, normalize: bool) -> str:
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


def build_graph(weights_path: Path, config: dict[str, Any], family: Family, pooling: str,
                normalize: bool, name: str = "sentence-model") -> Any:
    """The ONNX model (``onnx.ModelProto``) of an encoder of ``family`` (as the model's
    folder was read: the family is chosen there, once) with its pooling."""
    import onnx
    from onnx import TensorProto, helper

    if config.get("hidden_act", "gelu") not in ACTIVATIONS:
        raise ValueError(f"activation {config.get('hidden_act')!r} is not supported")
    g = Graph()
    mask = g.op("Cast", "attention_mask", to=TensorProto.FLOAT)
    weights = read_weights(weights_path, family.prefix)
    hidden = family.encoder(g, weights, config).encode(mask)
    del weights
    pooled = _pool(g, hidden, mask, pooling, normalize)
    g.nodes.append(helper.make_node("Identity", [pooled], [OUTPUT], name=OUTPUT))
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "tokens"])
              for n in family.inputs]
    output = helper.make_tensor_value_info(OUTPUT, TensorProto.FLOAT,
                                           ["batch", int(config["hidden_size"])])
    graph = helper.make_graph(g.nodes, name, inputs, [output], g.initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="kg-fuse", producer_version=RECIPE)
    model.ir_version = min(model.ir_version, 8)  # opset 17's IR: older runtimes read it
    helper.set_model_props(model, {"pooling": pooling, "normalize": str(normalize).lower()})
    onnx.checker.check_model(model)
    return model


def write_graph(target: Path, weights_path: Path, config: dict[str, Any], family: Family,
                pooling: str, normalize: bool, name: str) -> None:
    """Build the graph and save it to ``target`` (a temporary name: see :func:`written_once`)."""
    import onnx

    model = build_graph(weights_path, config, family, pooling, normalize, name)
    onnx.save_model(model, str(target))
