"""Concurrent callers share one forward pass.

Under concurrent searches each query would be embedded alone (a forward pass per query,
each paying the model's fixed cost). Here callers queue their texts; whichever caller
finds the model idle runs everything queued so far (up to `max_batch` texts) as one batch
and hands out the rows, while the next arrivals queue for the pass after. A lone caller
waits for nothing: its batch is just its own texts. No timer and no thread of its own.

`parallel` passes may run at once. One pass at a time keeps a single-threaded model busy
only while the caller's Python work waits for the GIL; a second pass (ONNX Runtime releases
the GIL while it runs) lets the model use a second core beside that work
(BENCHMARKS.md, "CPU per search in the API replica").
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from memray.embed.base import Embedder, InFront, Matrix


@dataclass
class _Request:
    texts: list[str]
    result: Matrix | None = None
    error: BaseException | None = None
    done: bool = False


class BatchingEmbedder(InFront):
    def __init__(self, inner: Embedder, *, max_batch: int = 64, parallel: int = 1) -> None:
        super().__init__(inner)
        if parallel < 1:
            raise ValueError(f"parallel must be at least 1, got {parallel}")
        self._max, self._parallel = max_batch, parallel
        self._cv = threading.Condition()
        self._queue: list[_Request] = []
        self._running = 0  # passes in progress
        self.batches = 0  # forward passes run (for tests, benches and /metrics)
        self.calls = 0  # callers whose texts went through those passes

    def embed(self, texts: Sequence[str]) -> Matrix:
        if len(texts) >= self._max:  # a batch on its own already
            vectors = self._inner.embed(texts)
            with self._cv:
                self.batches += 1
                self.calls += 1
            return vectors
        request = _Request(list(texts))
        with self._cv:
            self._queue.append(request)
            while not request.done:
                # An empty queue means this request is in a pass already running.
                if self._running >= self._parallel or not self._queue:
                    self._cv.wait()
                    continue
                self._running += 1
                batch = self._take()
                self._cv.release()
                try:
                    self._run(batch)
                finally:
                    self._cv.acquire()
                    self._running -= 1
                    self._cv.notify_all()
        if request.error is not None:
            raise request.error
        assert request.result is not None
        return request.result

    def _take(self) -> list[_Request]:
        """The queued requests, oldest first, up to `max_batch` texts (at least one)."""
        batch: list[_Request] = []
        size = 0
        while self._queue and (not batch or size + len(self._queue[0].texts) <= self._max):
            request = self._queue.pop(0)
            batch.append(request)
            size += len(request.texts)
        return batch

    def _run(self, batch: list[_Request]) -> None:
        flat = [t for r in batch for t in r.texts]
        try:
            vectors = self._inner.embed(flat) if flat else np.zeros((0, self.dim), np.float32)
        except BaseException as exc:  # every caller in the batch sees the failure
            for r in batch:
                r.error, r.done = exc, True
            return
        with self._cv:  # passes may end together
            self.batches += 1
            self.calls += len(batch)
        start = 0
        for r in batch:
            r.result = vectors[start:start + len(r.texts)]
            start += len(r.texts)
            r.done = True


def shared_passes(embedder: object) -> tuple[int, int]:
    """(forward passes, callers served) of the `BatchingEmbedder` in `embedder`'s chain;
    (0, 0) where passes are not shared. Callers per pass is how well concurrent queries
    share the model's fixed cost."""
    while isinstance(embedder, InFront):
        if isinstance(embedder, BatchingEmbedder):
            return embedder.batches, embedder.calls
        embedder = embedder._inner
    return 0, 0
