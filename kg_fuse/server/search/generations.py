"""Bounded caches of what a search derives from data that changes only with content.

A search's query vector, keyword rows and result summaries depend on the index, the
vocabulary and the store's content, all of which change rarely and all at once. A
:class:`GenerationCache` is tagged with the generation it was filled in (the objects
and the epoch it depends on); a lookup in another generation empties it first, so
nothing stale is ever returned and no invalidation has to be remembered elsewhere.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable
from typing import Generic, TypeVar

from cachetools import LRUCache

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


def _same(a: tuple[object, ...], b: tuple[object, ...]) -> bool:
    """Objects by identity (an index is not compared by value), numbers by value."""
    return len(a) == len(b) and all(
        x is y or (isinstance(x, int) and isinstance(y, int) and x == y)
        for x, y in zip(a, b, strict=True))


class GenerationCache(Generic[K, V]):
    """An LRU of at most ``maxsize`` entries, valid for one generation (thread-safe).

    The generation tuple is kept, so the objects in it stay alive and their identities
    cannot be reused by new objects while the entries are here.
    """

    def __init__(self, maxsize: int) -> None:
        self._maxsize = maxsize
        self._lock = threading.Lock()
        self._generation: tuple[object, ...] = ()
        self._entries: LRUCache[K, V] = LRUCache(maxsize)

    def _current(self, generation: tuple[object, ...]) -> LRUCache[K, V]:
        if not _same(generation, self._generation):
            self._generation = generation
            self._entries = LRUCache(self._maxsize)
        return self._entries

    def get(self, generation: tuple[object, ...], key: K) -> V | None:
        with self._lock:
            return self._current(generation).get(key)

    def get_many(self, generation: tuple[object, ...], keys: list[K]) -> dict[K, V]:
        """The entries of those ``keys`` that are here."""
        with self._lock:
            entries = self._current(generation)
            return {k: v for k in keys if (v := entries.get(k)) is not None}

    def put_many(self, generation: tuple[object, ...], items: dict[K, V]) -> None:
        with self._lock:
            self._current(generation).update(items)

    def put(self, generation: tuple[object, ...], key: K, value: V) -> None:
        with self._lock:
            self._current(generation)[key] = value

    def __len__(self) -> int:
        return len(self._entries)
