"""spaCy analyses in worker processes that outlive one batch (`ParsePool`).

spaCy's statistical NER and parser hold the GIL for most of their work, so a
second thread gains nothing on a second core (measured: a spaCy thread beside
the embedder's forward pass slowed both). Processes do gain: on musique-100's
1,890 passages two worker processes analysed in 21 s what one process took 30 s
for (2-core machine), and spaCy is a third of an LLM-free CUE-RAG build.

``nlp.pipe(n_process=...)`` starts its workers anew on every call and ships
whole ``Doc`` objects back; an index that parses its corpus a batch at a time
would pay that per batch. A `ParsePool` starts its workers once, each loading
the pipeline by name, and returns only the compact `Analysis` of each text
(sentences, spans, entities): exactly what `analyze_batch` returns in process.

`ParsePool.submit` returns at once, so a caller can embed one batch while the
workers parse the next ones. The embedder's forward pass leaves part of two
cores idle; workers started with a raised niceness (``nice=``) take that idle
time and little of the forward pass's (CUE-RAG's build, docs/methods/cue.md).

Workers are started with the platform's default method. Where that is
``spawn`` (macOS, Windows) or ``forkserver``, the calling script must guard its
entry point with ``if __name__ == "__main__":`` as for any multiprocessing code.
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

#: Texts per task sent to a worker: large enough that a task's overhead (pickling the
#: texts and analyses) is small next to parsing it, small enough to balance the workers.
TASK_TEXTS = 32

_WORKER_NLP: Language | None = None


def available_processes(cap: int = 4) -> int:
    """The CPUs this process may run on, at most ``cap`` (what the runner and CLI use)."""
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
        processes: Worker processes (at least 2; one process is `analyze_batch` itself).
        nice: Added to the workers' niceness (0: as this process). A caller that
            keeps its own cores busy while the workers parse ahead (see :meth:`submit`)
            lowers them, so they fill the cores' idle time instead of slowing it.
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
        """Start analysing ``texts`` and return at once; ``.result()`` waits for them.

        The caller works on while the workers parse: CUE-RAG embeds one batch of
        chunks while the next batches are parsed.
        """
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
