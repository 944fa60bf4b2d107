#!/usr/bin/env python3
"""Which encoder architectures torch could export to ONNX for kg-fuse, and how faithfully:
small models with random weights of families kg-fuse does not write itself (DistilBERT,
ModernBERT, DeBERTa-v2), mean-pooled and normalised as a sentence model is, exported with
``torch.onnx.export`` and run on ONNX Runtime at batch shapes other than the traced one.

    .venv/bin/python scripts/torch_export_probe.py [FAMILY ...]

Prints, per family, whether the export worked, how long it took, the graph's size and
the least cosine between ONNX Runtime's vectors and torch's. Needs torch and transformers
(the test set-up's); writes only to a temporary directory. docs/server.md ("Other
families, through torch") records what it printed.
"""

from __future__ import annotations

import argparse
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

VOCAB = 500
#: family -> (transformers config class, settings)
FAMILIES: dict[str, tuple[str, dict[str, Any]]] = {
    "DistilBERT": ("DistilBertConfig", dict(dim=32, n_layers=2, n_heads=2, hidden_dim=64,
                                            max_position_embeddings=128)),
    # alternating local (16-token window) and global attention, rotary positions
    "ModernBERT": ("ModernBertConfig", dict(hidden_size=32, num_hidden_layers=3,
                                            num_attention_heads=2, intermediate_size=64,
                                            max_position_embeddings=256, local_attention=16,
                                            global_attn_every_n_layers=2, pad_token_id=0,
                                            bos_token_id=1, eos_token_id=2, cls_token_id=1,
                                            sep_token_id=2)),
    # disentangled relative attention over 32 buckets
    "DeBERTa-v2": ("DebertaV2Config", dict(hidden_size=32, num_hidden_layers=2,
                                           num_attention_heads=2, intermediate_size=64,
                                           max_position_embeddings=128,
                                           relative_attention=True, position_buckets=32,
                                           pos_att_type=["p2c", "c2p"])),
}
#: (batch, tokens) checked; the export traces (2, 12), the last row padded
SHAPES = ((2, 12), (3, 40), (1, 100), (4, 7))


def _model(config_class: str, settings: dict[str, Any]) -> Any:
    import torch
    import transformers

    config = getattr(transformers, config_class)(vocab_size=VOCAB, **settings)
    config._attn_implementation = "eager"
    encoder = transformers.AutoModel.from_config(config).eval()
    torch.manual_seed(0)
    with torch.no_grad():
        for name, weight in encoder.named_parameters():
            if "norm" in name.lower():
                weight.copy_(1 + 0.3 * torch.randn_like(weight))
            else:
                weight.normal_(0.0, 0.5 if "embed" in name else 0.15)

    class Sentence(torch.nn.Module):
        """Mean pooling over the mask, then L2 normalisation: a sentence model's head."""

        def __init__(self) -> None:
            super().__init__()
            self.encoder = encoder

        def forward(self, ids: Any, mask: Any) -> Any:
            hidden = self.encoder(input_ids=ids, attention_mask=mask).last_hidden_state
            weights = mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, dim=-1)

    return Sentence().eval()


def _batch(batch: int, tokens: int) -> tuple[Any, Any]:
    import torch

    ids = torch.randint(5, VOCAB, (batch, tokens))
    mask = torch.ones_like(ids)
    if batch > 1:
        mask[-1, tokens // 2:] = 0
    return ids, mask


def probe(family: str, folder: Path) -> str:
    import onnxruntime as ort
    import torch

    net = _model(*FAMILIES[family])
    path = folder / f"{family}.onnx"
    started = time.monotonic()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                net, _batch(2, 12), str(path), input_names=["input_ids", "attention_mask"],
                output_names=["sentence_embedding"], opset_version=17, dynamo=False,
                dynamic_axes={"input_ids": {0: "batch", 1: "tokens"},
                              "attention_mask": {0: "batch", 1: "tokens"},
                              "sentence_embedding": {0: "batch"}})
    except Exception as exc:  # noqa: BLE001 - the finding is the failure itself
        return f"{family}: export failed: {type(exc).__name__}: {str(exc)[:200]}"
    took = time.monotonic() - started
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    least = 1.0
    for shape in SHAPES:
        ids, mask = _batch(*shape)
        with torch.no_grad():
            want = net(ids, mask).numpy()
        got = session.run(None, {"input_ids": ids.numpy(), "attention_mask": mask.numpy()})[0]
        least = min(least, float(np.min(np.sum(want * got, axis=1)
                                        / np.linalg.norm(want, axis=1)
                                        / np.linalg.norm(got, axis=1))))
    return (f"{family}: exported in {took:.1f} s ({path.stat().st_size / 1e3:.0f} kB); least "
            f"cosine to torch over shapes {', '.join(map(str, SHAPES))}: {least:.7f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("families", nargs="*", metavar="FAMILY",
                        help=f"any of {', '.join(FAMILIES)} (default: all)")
    args = parser.parse_args()
    if unknown := set(args.families) - set(FAMILIES):
        parser.error(f"unknown families: {', '.join(sorted(unknown))}")
    import torch

    print(f"torch {torch.__version__}, legacy TorchScript exporter (dynamo=False), opset 17")
    with tempfile.TemporaryDirectory() as folder:
        for family in args.families or FAMILIES:
            print(probe(family, Path(folder)), flush=True)


if __name__ == "__main__":
    main()
