"""Sentence embeddings on ONNX Runtime, offline, without torch.

A model (:class:`~kg_fuse.server.embedding.models.ModelSpec`; all-MiniLM-L6-v2 unless
another is chosen) runs from its ONNX graph, made once from its weights
(:mod:`kg_fuse.server.embedding.graph`), with ``onnxruntime`` and the model's own
``tokenizer.json`` (``tokenizers``): about 160 MiB resident and half a second to load,
against torch's 450 MiB and several seconds. Vectors match sentence-transformers' to a
cosine of 0.99999 or better, so stores built before keep working.

Documents and queries are embedded apart (:meth:`Embedder.encode` and
:meth:`Embedder.encode_queries`): a model trained with prompts (bge's query instruction,
e5's ``query: ``/``passage: ``) gets each text with its own prompt, as
sentence-transformers' ``encode_query``/``encode_document`` give them.

The glue (tokenize, run, done: pooling and normalisation are in the graph) is written
here, not taken from a library, because none fits offline: sentence-transformers' ONNX
backend needs ``import sentence_transformers``, which imports torch (checked), as do
optimum's ORT models; fastembed cannot make the ONNX file from the weights, and takes its
truncation from the packaged ``tokenizer_config.json`` (512 tokens) where
sentence-transformers cuts all-MiniLM-L6-v2 at 256: 4 of the stdlib store's 6,910
embedded texts are longer (up to 499 tokens) and would get other vectors than the stored
ones.

The server calls it from worker threads (routes and jobs run searches and ingestion
through anyio's thread pool) so encoding never blocks the event loop. An
``InferenceSession`` may be run from several threads at once and the tokenizer is only
read once loaded, so there is no lock around a run. Searches that arrive together share
one: a search's query (:meth:`Embedder.encode_one`) joins the queries waiting while a
run is under way, and the next run embeds them all as one batch (:class:`QueryBatches`).
One run of eight short queries costs about what three single ones do, and eight runs
at once on two cores only crowd each other out.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from kg_fuse.memory import give_memory_back
from kg_fuse.server.embedding import models
from kg_fuse.server.embedding.models import ModelSpec
from kg_fuse.server.embedding.runtime import import_onnxruntime

log = logging.getLogger(__name__)

BATCH_SIZE = 64
#: ONNX Runtime's threads within one run, at most one per core. They sleep when idle
#: instead of spinning (ONNX Runtime's default): on a loaded two-core machine spinning
#: made 8 single-query runs 2.4x slower (199 ms against 83 ms) and a batch of 8 3.2x.
INTRA_OP_THREADS = 2
#: Queries embedded in one run at most: past this, a batch waits longer than it saves.
QUERY_BATCH = 16


class _Waiting:
    """A query waiting for its vector; ``turn`` is set when it is embedded or when its
    thread is to run the next batch."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.turn = threading.Event()
        self.vector: np.ndarray | None = None
        self.error: BaseException | None = None


class QueryBatches:
    """Single queries embedded together when they arrive together.

    No thread of its own and no waiting window: a query that finds no run under way is
    embedded at once, by its own thread, so a lone search pays nothing. Queries that
    arrive while a run is under way wait; when it ends, the thread of the first of them
    runs them all (up to ``QUERY_BATCH``) as the next batch, and so on while any wait.
    """

    def __init__(self, run: Callable[[list[str]], np.ndarray]) -> None:
        self._run = run
        self._lock = threading.Lock()
        self._queue: list[_Waiting] = []
        self._running = False

    def embed(self, text: str) -> np.ndarray:
        mine = _Waiting(text)
        with self._lock:
            self._queue.append(mine)
            lead = not self._running
            self._running = True
        while True:
            if lead:
                self._run_next()
            mine.turn.wait()
            if mine.vector is not None or mine.error is not None:
                break
            mine.turn.clear()  # not embedded: this thread runs the next batch
            lead = True
        if mine.error is not None:
            raise mine.error
        assert mine.vector is not None
        return mine.vector

    def _run_next(self) -> None:
        with self._lock:
            batch, self._queue = self._queue[:QUERY_BATCH], self._queue[QUERY_BATCH:]
        try:
            vectors = self._run([w.text for w in batch])
        except BaseException as exc:  # each waiting search gets the error
            for waiting in batch:
                waiting.error = exc
        else:
            for waiting, vector in zip(batch, vectors, strict=True):
                waiting.vector = vector
        with self._lock:
            if self._queue:
                self._queue[0].turn.set()  # its thread leads the next batch
            else:
                self._running = False
        for waiting in batch:
            waiting.turn.set()


class Embedder:
    """Float32 sentence embeddings of one model (unit length if it normalises); thread-safe."""

    def __init__(self, spec: ModelSpec | None = None) -> None:
        self.spec = spec or models.resolve(None)
        self._session: Any = None
        self._tokenizer: Any = None
        self._release: Any = None
        self._feeds: list[tuple[str, str]] = []
        self._lock = threading.Lock()
        self._queries = QueryBatches(self._run_query)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def dimensions(self) -> int:
        return self.spec.dimensions

    def _load(self) -> None:
        if self._session is not None:
            return
        with self._lock:
            if self._session is not None:
                return
            from kg_fuse.server.embedding.folder import load_tokenizer

            path = models.ensure_graph(self.spec)
            log.info("loading embedding model %s from %s", self.spec.name, path)
            tokenizer = load_tokenizer(self.spec.folder, self.spec.max_seq_length)
            onnxruntime = import_onnxruntime()
            options = onnxruntime.SessionOptions()
            options.intra_op_num_threads = min(INTRA_OP_THREADS, os.cpu_count() or 1)
            options.inter_op_num_threads = 1
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            session = onnxruntime.InferenceSession(
                str(path), options, providers=["CPUExecutionProvider"])
            # a batch of long texts grows ONNX Runtime's memory arena by ~180 MiB, which
            # it keeps; the last run of a batch encode (a build, an ingest) gives it back
            self._release = onnxruntime.RunOptions()
            self._release.add_run_config_entry("memory.enable_memory_arena_shrinkage",
                                               "cpu:0")
            # what the graph reads of an encoding: a family without token types has no
            # token_type_ids input
            attrs = {"input_ids": "ids", "attention_mask": "attention_mask",
                     "token_type_ids": "type_ids"}
            self._feeds = [(i.name, attrs[i.name]) for i in session.get_inputs()]
            self._tokenizer = tokenizer
            self._session = session
            give_memory_back()

    def load(self) -> None:
        """Load the model now (start-up), rather than on the first query."""
        self._load()

    def _run(self, texts: Sequence[str], release: bool = False) -> np.ndarray:
        if self.spec.quantised and len(texts) > 1:
            # ONNX Runtime's dynamic quantisation takes one activation scale per tensor,
            # over the whole batch and its padding: a text's int8 vector would depend on
            # the texts run with it (cosine 0.969 between one text alone and in a batch
            # of 30). Run alone, a text gets the same vector every time, and no padding.
            return np.concatenate([self._run(texts[i:i + 1], release and i == len(texts) - 1)
                                   for i in range(len(texts))])
        encodings = self._tokenizer.encode_batch(list(texts))
        feeds = {name: np.array([getattr(e, attr) for e in encodings], dtype=np.int64)
                 for name, attr in self._feeds}
        return self._session.run(None, feeds, self._release if release else None)[0]

    def _run_query(self, texts: Sequence[str]) -> np.ndarray:
        prompt = self.spec.prompts.query
        return self._run([prompt + t for t in texts] if prompt else texts)

    def encode(self, texts: Sequence[str], progress: bool = False) -> np.ndarray:
        """Embed DOCUMENTS (the model's document prompt before each), blocking."""
        return self._encode(texts, self.spec.prompts.document, progress)

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Embed QUERIES together (the model's query prompt before each), blocking."""
        return self._encode(texts, self.spec.prompts.query, False)

    def _encode(self, texts: Sequence[str], prompt: str, progress: bool) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        self._load()
        # batches of similar length pad little (as sentence-transformers does)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        vectors = np.empty((len(texts), self.dimensions), dtype=np.float32)
        bar = self._bar(len(texts)) if progress else None
        try:
            for start in range(0, len(order), BATCH_SIZE):
                rows = order[start:start + BATCH_SIZE]
                last = start + BATCH_SIZE >= len(order)
                vectors[rows] = self._run([prompt + texts[i] for i in rows],
                                          release=last and len(texts) > 1)
                if bar is not None:
                    bar.update(len(rows))
        finally:
            if bar is not None:
                bar.close()
        return vectors

    @staticmethod
    def _bar(total: int) -> Any:
        from tqdm import tqdm

        return tqdm(total=total, desc="embedding concepts", unit="concept", file=sys.stderr)

    def encode_one(self, text: str) -> np.ndarray:
        """One QUERY's vector; queries asked for together share a run (:class:`QueryBatches`)."""
        self._load()
        return self._queries.embed(text)
