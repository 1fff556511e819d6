"""Many readers or one writer: retrievers read an index while another thread inserts or
deletes, and each sees the index wholly before or wholly after a write.

A retriever reads the index's snapshot and then the chunks it names from the
docstore; a delete between the two would name chunks that are gone. Readers
hold the lock for one retrieval, writers for one insert or delete. The writer
may re-enter and may read; a waiting writer holds new readers back, so a
stream of queries cannot starve an update.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

__all__ = ["ReadWriteLock", "reading"]


class ReadWriteLock:
    """See the module docs. A reader must not ask to write (that would wait for itself)."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._readers = 0
        self._writer: int | None = None
        self._depth = 0
        self._waiting = 0
        self._local = threading.local()

    @contextlib.contextmanager
    def reading(self) -> Iterator[None]:
        me = threading.get_ident()
        with self._cond:
            if self._writer == me:  # the writer reads what it is writing
                counted = False
            else:
                nested = getattr(self._local, "depth", 0)
                if not nested:
                    while self._writer is not None or self._waiting:
                        self._cond.wait()
                    self._readers += 1
                self._local.depth = nested + 1
                counted = True
        try:
            yield
        finally:
            if counted:
                with self._cond:
                    self._local.depth -= 1
                    if not self._local.depth:
                        self._readers -= 1
                        self._cond.notify_all()

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        me = threading.get_ident()
        with self._cond:
            if self._writer == me:
                self._depth += 1
            else:
                if getattr(self._local, "depth", 0):
                    raise RuntimeError("a reader of this index cannot write to it")
                self._waiting += 1
                try:
                    while self._writer is not None or self._readers:
                        self._cond.wait()
                finally:
                    self._waiting -= 1
                self._writer, self._depth = me, 1
        try:
            yield
        finally:
            with self._cond:
                self._depth -= 1
                if not self._depth:
                    self._writer = None
                    self._cond.notify_all()


def reading(index: object) -> contextlib.AbstractContextManager:
    """``index.reading()`` where the index has it (every suite index), else nothing to hold."""
    hold = getattr(index, "reading", None)
    return hold() if callable(hold) else contextlib.nullcontext()
