"""Versioned, atomic on-disk persistence.

An index folder holds a ``manifest.json`` beside its data files, and is written
to a temporary sibling renamed into place once complete, so a crash never leaves
a half-written index (LlamaIndex's side of it is :mod:`.index_persist`'s). The manifest is sealed last: it lists every file's size and
SHA-256 and carries a digest of itself, so a file damaged later (even one that
still parses) is named when the folder is read (:func:`verify`)."""

from __future__ import annotations

import contextlib
import hashlib
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
#: Manifest keys of the seal: each file's size and SHA-256, and the manifest's own digest.
FILES = "sealed_files"
CHECKSUM = "seal"


class IndexFormatError(ValueError):
    """A persisted index is missing, of another kind, or of an unsupported format version."""


@contextlib.contextmanager
def atomic_dir(target: str | os.PathLike, manifest: str = MANIFEST) -> Iterator[Path]:
    """Yield a fresh temporary folder that replaces ``target`` when the block succeeds.

    If the block raises, ``target`` is left as it was. Between the two renames
    the old copy is kept under a ``.old`` name, which :func:`recover` puts back.
    A ``manifest`` file the block wrote is sealed (:func:`seal`) before the swap.
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
        if (tmp / manifest).is_file():
            seal(tmp, manifest)
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
    """Read and check a manifest (``kind`` None and ``supported`` empty accept any) and
    the files it seals.

    Raises:
        IndexFormatError: Missing manifest, other kind, unsupported version, or a file
            missing or damaged (named).
    """
    folder = Path(folder)
    recover(folder)
    path = folder / MANIFEST
    if not path.is_file():
        raise IndexFormatError(f"{folder} holds no persisted index ({MANIFEST} is missing)")
    data = read_json(path)
    if not isinstance(data, dict):
        raise IndexFormatError(f"{path} is damaged (not a JSON object)")
    if not isinstance(data.get("kind"), str) or "format_version" not in data:
        raise IndexFormatError(f"{path} is damaged (no index kind or format version)")
    if kind is not None and data.get("kind") != kind:
        raise IndexFormatError(f"{folder} holds a {data.get('kind')!r} index, not {kind!r}")
    versions = (supported,) if isinstance(supported, int) else tuple(supported)
    if versions and data.get("format_version") not in versions:
        raise IndexFormatError(
            f"{folder} has format version {data.get('format_version')}; this release reads "
            f"{', '.join(map(str, versions))}. Rebuild the index with this release."
        )
    check_sealed(folder, data)
    return data


def seal(folder: str | os.PathLike, manifest: str = MANIFEST) -> None:
    """Record in ``folder/manifest`` the size and SHA-256 of every file beside it, then its
    own digest. A sub-folder with a manifest of its own is covered by that manifest's entry
    (it seals the rest), so nothing is hashed twice on load."""
    folder = Path(folder)
    data = read_json(folder / manifest)
    data[FILES] = {
        path.relative_to(folder).as_posix(): {"bytes": path.stat().st_size, "sha256": _digest(path)}
        for path in _sealed_files(folder, manifest)
    }
    data.pop(CHECKSUM, None)
    data[CHECKSUM] = _json_digest(data)
    write_json(folder / manifest, data)


def verify(
    folder: str | os.PathLike, data: dict[str, Any], manifest: str = MANIFEST, files: bool = True
) -> list[str]:
    """What differs from the seal of ``folder`` (``data``: its manifest, as read; with
    ``files`` False only the manifest's own digest is checked).

    Returns:
        One line per problem, each naming the file; ``[]`` when every file matches.
    """
    folder = Path(folder)
    if not is_sealed(data):
        return [
            f"{folder / manifest} carries no checksums (damaged, or written by an earlier release)"
        ]
    problems = []
    if data[CHECKSUM] != _json_digest(data):
        problems.append(
            f"{folder / manifest} was changed after it was written (its digest differs)"
        )
    for name, entry in data[FILES].items() if files else ():
        path = (folder / name).resolve()
        if not path.is_relative_to(folder.resolve()):
            problems.append(f"{folder / manifest} names a file outside the folder: {name}")
        elif not path.is_file():
            problems.append(f"{folder / name} is missing")
        elif path.stat().st_size != entry.get("bytes") or _digest(path) != entry.get("sha256"):
            problems.append(
                f"{folder / name} is damaged (its checksum differs from the manifest's)"
            )
    return problems


def is_sealed(data: dict[str, Any]) -> bool:
    """Whether a manifest carries a seal (written by this release or a later one)."""
    return isinstance(data.get(FILES), dict) and isinstance(data.get(CHECKSUM), str)


def check_sealed(
    folder: str | os.PathLike, data: dict[str, Any], manifest: str = MANIFEST, files: bool = True
) -> None:
    """:func:`verify`, raising on the first problem.

    Raises:
        IndexFormatError: A file is missing or damaged; the message names it.
    """
    problems = verify(folder, data, manifest, files)
    if problems:
        more = f" (and {len(problems) - 1} more problem(s))" if len(problems) > 1 else ""
        raise IndexFormatError(problems[0] + more)


def _sealed_files(folder: Path, manifest: str | None) -> list[Path]:
    out: list[Path] = []
    for entry in sorted(folder.iterdir()):
        if entry.name == manifest:
            continue
        if entry.is_dir() and not entry.is_symlink():
            inner = entry / MANIFEST
            out.extend([inner] if inner.is_file() else _sealed_files(entry, None))
        elif entry.is_file():
            out.append(entry)
    return out


def _digest(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def _json_digest(data: dict[str, Any]) -> str:
    body = {k: v for k, v in data.items() if k != CHECKSUM}
    text = json.dumps(body, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8", errors="surrogatepass")).hexdigest()


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


def expansion_cap(stored_bytes: int) -> int:
    """Most bytes an archive of ``stored_bytes`` may expand to when read (a compression
    bomb is refused, not unpacked): generous for what this library writes, which
    compresses JSON ids and texts about tenfold and stores arrays uncompressed."""
    return 64 * 2**20 + 100 * stored_bytes


def _check_expansion(path: str | os.PathLike) -> None:
    import zipfile

    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            if info.file_size > expansion_cap(info.compress_size):
                raise IndexFormatError(
                    f"{path} is damaged ({info.filename} would expand from "
                    f"{info.compress_size} to {info.file_size} bytes)"
                )


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
        _check_expansion(path)
        with np.load(path, allow_pickle=False) as data:
            return {k: data[k] for k in data.files}
    except (FileNotFoundError, IndexFormatError):
        raise
    except Exception as exc:  # BadZipFile, a cut member, pickled data refused, ...
        raise IndexFormatError(f"{path} is damaged ({type(exc).__name__}: {exc})") from exc
