"""One writer at a time per index folder; readers are never blocked.

``graphrag-ext index`` (``--out`` and ``--update``) holds ``DIR/.writer.lock``
(``filelock``: an OS lock, released when the process dies) for the whole run,
from reading the collection to its atomic swap, so two updates never both
start from the same state and the later one never undoes the earlier. Under
the lock the leftovers of a killed writer (the temporary folder of a swap, the
previous copy kept during it) are put back or removed; readers touch neither.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from pathlib import Path

from filelock import FileLock, Timeout

from ..core.persist import recover
from .errors import UserError

__all__ = ["LOCK_FILE", "writer_lock"]

LOCK_FILE = ".writer.lock"


@contextlib.contextmanager
def writer_lock(folder: Path, index: Path, wait: float = 0.0) -> Iterator[None]:
    """Hold ``folder``'s writer lock (waiting up to ``wait`` seconds), then tidy ``index``'s
    leftovers of killed runs.

    Raises:
        UserError: Another writer holds the lock past ``wait``.
    """
    folder.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(folder / LOCK_FILE))
    try:
        lock.acquire(timeout=max(0.0, wait))
    except Timeout:
        raise UserError(
            f"{folder} is being written by another graphrag-ext index run; wait for it to "
            f"finish, or pass --wait SECONDS to queue behind it"
        ) from None
    try:
        _tidy(index)
        yield
    finally:
        lock.release()


def _tidy(index: Path) -> None:
    """Put back an index whose swap was interrupted; remove what killed writers left."""
    recover(index)
    parent = index.parent
    for leftover in parent.glob(f".{index.name}.tmp-*"):
        shutil.rmtree(leftover, ignore_errors=True)
    old = parent / f".{index.name}.old"
    if old.exists() and index.exists():
        shutil.rmtree(old, ignore_errors=True)
