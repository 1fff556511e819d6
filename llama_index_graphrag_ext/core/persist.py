"""Versioned, atomic on-disk persistence.

An index folder holds a ``manifest.json`` (what kind of index, which format
version, which library version wrote it) beside its data files. Writes go to a
temporary sibling folder that is renamed into place only once complete, so a
crash mid-write never leaves a half-written index: the old one stays intact.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

MANIFEST = "manifest.json"


class IndexFormatError(ValueError):
    """A persisted index is missing, of another kind, or of an unsupported format version."""


@contextlib.contextmanager
def atomic_dir(target: str | os.PathLike) -> Iterator[Path]:
    """Yield a fresh temporary folder that replaces ``target`` when the block succeeds.

    If the block raises, the temporary folder is removed and ``target`` is left
    exactly as it was. The swap is two renames within one parent folder; between
    them the old copy is kept under a ``.old`` name, so even a crash there loses
    nothing (the next write or :func:`recover` puts it back).
    """
    target = Path(target)
    parent = target.parent if str(target.parent) else Path(".")
    parent.mkdir(parents=True, exist_ok=True)
    recover(target)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=parent))
    try:
        yield tmp
        _fsync_tree(tmp)
        backup = parent / f".{target.name}.old"
        if target.exists():
            if backup.exists():
                shutil.rmtree(backup)
            os.replace(target, backup)
        os.replace(tmp, target)
        if backup.exists():
            shutil.rmtree(backup, ignore_errors=True)
        _fsync_dir(parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def recover(target: str | os.PathLike) -> bool:
    """Restore ``target`` from its ``.old`` copy if a crash interrupted a swap."""
    target = Path(target)
    backup = target.parent / f".{target.name}.old"
    if backup.exists() and not target.exists():
        os.replace(backup, target)
        logger.warning("restored %s from an interrupted write", target)
        return True
    return False


def _fsync_tree(folder: Path) -> None:
    for path in folder.rglob("*"):
        if path.is_file():
            with open(path, "rb") as fh:
                os.fsync(fh.fileno())
    _fsync_dir(folder)


def _fsync_dir(folder: Path) -> None:
    with contextlib.suppress(OSError):  # not every filesystem lets a folder be fsynced
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_manifest(folder: Path, kind: str, format_version: int, **extra: Any) -> None:
    """Write the manifest naming the index ``kind`` and its ``format_version``."""
    from llama_index_graphrag_ext import __version__

    data = {
        "kind": kind,
        "format_version": format_version,
        "library_version": __version__,
        "written_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        **extra,
    }
    write_json(Path(folder) / MANIFEST, data)


def read_manifest(
    folder: str | os.PathLike, kind: str | None = None, supported: int | tuple[int, ...] = ()
) -> dict[str, Any]:
    """Read and check a manifest.

    Args:
        folder: The index folder.
        kind: Expected index kind, or None to accept any.
        supported: Format versions this code can read (empty accepts any).

    Raises:
        IndexFormatError: Missing manifest, other kind, or unsupported version.
    """
    folder = Path(folder)
    recover(folder)
    path = folder / MANIFEST
    if not path.is_file():
        raise IndexFormatError(f"{folder} holds no persisted index ({MANIFEST} is missing)")
    data = read_json(path)
    if kind is not None and data.get("kind") != kind:
        raise IndexFormatError(f"{folder} holds a {data.get('kind')!r} index, not {kind!r}")
    versions = (supported,) if isinstance(supported, int) else tuple(supported)
    if versions and data.get("format_version") not in versions:
        raise IndexFormatError(
            f"{folder} has format version {data.get('format_version')}; this release reads "
            f"{', '.join(map(str, versions))}. Rebuild the index with this release."
        )
    return data


def write_json(path: str | os.PathLike, data: Any) -> None:
    """Write JSON (UTF-8, compact)."""
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(data, fh, ensure_ascii=False, separators=(",", ":"))


def read_json(path: str | os.PathLike) -> Any:
    """Read JSON written by :func:`write_json`."""
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def write_arrays(path: str | os.PathLike, **arrays: np.ndarray) -> None:
    """Write named numpy arrays to one ``.npz`` file (no pickles)."""
    with open(path, "wb") as fh:
        np.savez(fh, **{k: np.asarray(v) for k, v in arrays.items()})


def read_arrays(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """Read arrays written by :func:`write_arrays`."""
    with np.load(path, allow_pickle=False) as data:
        return {k: data[k] for k in data.files}


def folder_size(folder: str | os.PathLike) -> int:
    """Total bytes of the files under ``folder``."""
    return sum(p.stat().st_size for p in Path(folder).rglob("*") if p.is_file())
