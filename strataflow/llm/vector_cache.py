"""A process-wide least-recently-used cache of vectors, safe across threads: the query embeddings of every
model (strataflow.llm.embeddings) and the second model's question and passage vectors
(strataflow.retrieval.cross_check)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

import numpy as np

Key = TypeVar("Key", bound=Hashable)


class VectorCache(Generic[Key]):
    """At most `size` vectors by key; a read makes its key the most recent, a write past `size` drops the
    least recent. Vectors are shared by every reader: they are made read-only when stored."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[Key, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Key) -> np.ndarray | None:
        with self._lock:
            vector = self._items.get(key)
            if vector is not None:
                self._items.move_to_end(key)
            return vector

    def put(self, key: Key, vector: np.ndarray) -> None:
        vector.setflags(write=False)
        with self._lock:
            self._items[key] = vector
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)
