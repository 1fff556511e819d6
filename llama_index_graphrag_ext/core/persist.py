"""Versioned, atomic on-disk persistence.

An index folder holds a ``manifest.json`` beside its data files, and is written
to a temporary sibling renamed into place once complete, so a crash never leaves
a half-written index. LlamaIndex's ``load_index_from_storage`` meets a tagged
:class:`SuiteIndexList` and raises an error naming ``Class.load(dir)``.
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from llama_index.core.data_structs.data_structs import IndexList
from llama_index.core.data_structs.registry import INDEX_STRUCT_TYPE_TO_INDEX_STRUCT_CLASS
from llama_index.core.indices.registry import INDEX_STRUCT_TYPE_TO_INDEX_CLASS

logger = logging.getLogger(__name__)

MANIFEST = "manifest.json"


class IndexFormatError(ValueError):
    """A persisted index is missing, of another kind, or of an unsupported format version."""


#: LlamaIndex's index-store file name, written so its loader finds the suite's struct.
INDEX_STORE_FILE = "index_store.json"
#: Type key of the suite's index structs in LlamaIndex's index store.
SUITE_STRUCT_TYPE = "graphrag_ext_index"


@dataclass
class SuiteIndexList(IndexList):
    """LlamaIndex's ``IndexList``, tagged with the suite index class that owns it."""

    index_class: str = ""

    @classmethod
    def get_type(cls) -> str:  # type: ignore[override]
        return SUITE_STRUCT_TYPE


def _refuse_generic_load(index_struct: SuiteIndexList, **kwargs: Any) -> None:
    """What ``load_index_from_storage`` meets for a suite index: an error that says how to load it."""
    dotted = index_struct.index_class or "a llama-index-graphrag-ext index"
    name = dotted.rsplit(".", 1)[-1]
    raise IndexFormatError(
        f"This storage holds {dotted}, which LlamaIndex's load_index_from_storage cannot "
        f"rebuild (its graph and vectors live in files of its own). Persist it with "
        f"index.persist(dir) and load it with {name}.load(dir)."
    )


INDEX_STRUCT_TYPE_TO_INDEX_STRUCT_CLASS[SUITE_STRUCT_TYPE] = SuiteIndexList  # type: ignore[index]
INDEX_STRUCT_TYPE_TO_INDEX_CLASS[SUITE_STRUCT_TYPE] = _refuse_generic_load  # type: ignore[index]


@contextlib.contextmanager
def atomic_dir(target: str | os.PathLike) -> Iterator[Path]:
    """Yield a fresh temporary folder that replaces ``target`` when the block succeeds.

    If the block raises, ``target`` is left as it was. Between the two renames
    the old copy is kept under a ``.old`` name, which :func:`recover` puts back.
    """
    target = Path(target)
    parent = target.parent if str(target.parent) else Path(".")
    parent.mkdir(parents=True, exist_ok=True)
    recover(target)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=parent))
    # mkdtemp makes a private folder (0700); the index is written as the user's umask says,
    # so a folder meant to be shared can be read by the others it is shared with.
    tmp.chmod(0o777 & ~_umask())
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


def _umask() -> int:
    mask = os.umask(0o022)  # reading the umask means setting it: put it straight back
    os.umask(mask)
    return mask


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
    from importlib.metadata import version

    data = {
        "kind": kind,
        "format_version": format_version,
        "library_version": version("llama-index-graphrag-ext"),
        "written_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        **extra,
    }
    write_json(Path(folder) / MANIFEST, data)


def read_manifest(
    folder: str | os.PathLike, kind: str | None = None, supported: int | tuple[int, ...] = ()
) -> dict[str, Any]:
    """Read and check a manifest (``kind`` None and ``supported`` empty accept any).

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
    """Read JSON written by :func:`write_json`.

    Raises:
        IndexFormatError: The file is not JSON (damaged); the message names it.
    """
    with open(path, encoding="utf-8") as fh:
        try:
            return json.load(fh)
        except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
            raise IndexFormatError(f"{path} is damaged ({type(exc).__name__}: {exc})") from exc


def write_arrays(path: str | os.PathLike, **arrays: np.ndarray) -> None:
    """Write named numpy arrays to one ``.npz`` file (no pickles)."""
    with open(path, "wb") as fh:
        np.savez(fh, **{k: np.asarray(v) for k, v in arrays.items()})


def read_arrays(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """Read arrays written by :func:`write_arrays`.

    Raises:
        IndexFormatError: The file is not such an archive (damaged); the message names it.
    """
    try:
        with np.load(path, allow_pickle=False) as data:
            return {k: data[k] for k in data.files}
    except FileNotFoundError:
        raise
    except Exception as exc:  # BadZipFile, a cut member, pickled data refused, ...
        raise IndexFormatError(f"{path} is damaged ({type(exc).__name__}: {exc})") from exc
