"""spaCy analyses in worker processes that outlive one batch (`ParsePool`).

spaCy holds the GIL for most of a parse, so only processes gain a core.
``nlp.pipe(n_process=...)`` restarts its workers on every call and ships whole
``Doc`` objects back; a `ParsePool` starts its workers once and returns only the
compact `Analysis` of each text. Under ``spawn`` or ``forkserver`` the calling
script needs an ``if __name__ == "__main__":`` guard.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
from collections.abc import Collection, Sequence
from concurrent.futures import Future, ProcessPoolExecutor

from spacy.language import Language

from .analysis import Analysis, _analyze_uncached, _with_labels
from .spacy import load_spacy

logger = logging.getLogger(__name__)

#: Texts per task sent to a worker: pickling overhead small, workers balanced.
TASK_TEXTS = 32

_WORKER_NLP: Language | None = None


def available_processes(cap: int = 4) -> int:
    """The CPUs this process may run on, at most ``cap``."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    return max(1, min(cap, cpus))


def _start_worker(model: str | None, nice: int = 0) -> None:
    global _WORKER_NLP
    if nice:
        os.nice(nice)
    # Under fork the parent's loaded pipeline is inherited and this is a cache hit.
    _WORKER_NLP = load_spacy(model)


def _work(texts: list[str], sentences: str = "model") -> list[Analysis]:
    return _analyze_uncached(
        texts, _WORKER_NLP, None, batch_size=64, n_process=1, sentences=sentences
    )


class PendingAnalyses:
    """Analyses under way in a `ParsePool` (see `ParsePool.submit`)."""

    def __init__(self, futures: list[Future], keep: frozenset[str] | None) -> None:
        self._futures = futures
        self._keep = keep

    def result(self) -> list[Analysis]:
        """One `Analysis` per submitted text, in order (waits for the workers)."""
        out: list[Analysis] = []
        for future in self._futures:
            analyses = future.result()
            out.extend(
                analyses if self._keep is None else [_with_labels(a, self._keep) for a in analyses]
            )
        return out


class ParsePool:
    """Worker processes, each with its own copy of one spaCy pipeline.

    Use it as a context manager (or call :meth:`close`); :meth:`analyze` gives
    the same analyses as `analyze_batch` with the pipeline ``load_spacy(model)``.

    Args:
        model: The spaCy pipeline each worker loads (None: `load_spacy`'s default chain).
        processes: Worker processes (at least 2).
        nice: Added to the workers' niceness, so workers parsing ahead fill idle
            cores instead of slowing the caller.
    """

    def __init__(self, model: str | None, processes: int, *, nice: int = 0) -> None:
        if processes < 2:
            raise ValueError(f"a ParsePool needs at least 2 processes, got {processes}")
        self.model = model
        self.processes = int(processes)
        load_spacy(model)  # fail here, with the install hint, not inside a worker
        self._executor = ProcessPoolExecutor(
            max_workers=self.processes,
            mp_context=multiprocessing.get_context(),
            initializer=_start_worker,
            initargs=(model, int(nice)),
        )

    def analyze(
        self,
        texts: Sequence[str],
        labels: Collection[str] | None = None,
        *,
        sentences: str = "model",
    ) -> list[Analysis]:
        """One `Analysis` per text, in order (entities restricted to ``labels``;
        ``sentences`` as in `analyze_batch`)."""
        return self.submit(texts, labels, sentences=sentences).result()

    def submit(
        self,
        texts: Sequence[str],
        labels: Collection[str] | None = None,
        *,
        sentences: str = "model",
    ) -> PendingAnalyses:
        """Start analysing ``texts`` and return at once; ``.result()`` waits for them."""
        tasks = [list(texts[i : i + TASK_TEXTS]) for i in range(0, len(texts), TASK_TEXTS)]
        futures = [self._executor.submit(_work, task, sentences) for task in tasks]
        return PendingAnalyses(futures, None if labels is None else frozenset(labels))

    def close(self) -> None:
        """Stop the workers."""
        self._executor.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> ParsePool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
