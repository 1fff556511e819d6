"""Reading a user's files: LlamaIndex's ``SimpleDirectoryReader``, one ``Document`` per file.

A file's absolute path is its document id, so ``--update`` can find, replace and
delete it through the index's own ``insert`` / ``delete_ref_doc``; its content
hash (SHA-256 of the bytes) tells a changed file from an unchanged one. Readers
that return one document per page (PDF) are joined into one text, and the page
starts are kept so a retrieved passage can name its page.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llama_index.core import SimpleDirectoryReader
from llama_index.core.schema import Document

from .errors import UserError

logger = logging.getLogger(__name__)

#: Extensions read as plain text (``SimpleDirectoryReader``'s default for unknown types).
TEXT_EXTENSIONS = (".txt", ".md", ".markdown", ".rst", ".text")
#: Extensions with a reader of their own (``llama-index-readers-file``).
RICH_EXTENSIONS = (".html", ".htm", ".pdf", ".docx")
SUPPORTED = TEXT_EXTENSIONS + RICH_EXTENSIONS
#: Joins the pages of a multi-page file.
PAGE_BREAK = "\n\n"


@dataclass
class ReadFile:
    """One file read into one document's text."""

    path: str
    sha256: str
    text: str
    #: ``[start_char, page label]`` of each page (empty for one-page formats).
    pages: list[list[Any]] = field(default_factory=list)

    def document(self) -> Document:
        """The file as a LlamaIndex ``Document`` whose id is its path."""
        name = Path(self.path).name
        return Document(
            text=self.text,
            id_=self.path,
            metadata={"file_path": self.path, "file_name": name, "title": Path(self.path).stem},
            excluded_embed_metadata_keys=["file_path", "file_name"],
            excluded_llm_metadata_keys=["file_path"],
        )


@dataclass
class Skipped:
    """A file that was not indexed, and why."""

    path: str
    reason: str


@dataclass
class Reading:
    """What reading the inputs gave."""

    files: list[ReadFile]
    skipped: list[Skipped]


def _file_extractor() -> dict[str, Any]:
    try:
        from llama_index.readers.file import DocxReader, HTMLTagReader, PDFReader
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise UserError(
            "reading PDF, DOCX and HTML needs llama-index-readers-file: "
            "`pip install llama-index-graphrag-ext` (or `make install`) installs it"
        ) from exc
    html = HTMLTagReader(tag="body")
    return {".pdf": PDFReader(), ".docx": DocxReader(), ".html": html, ".htm": html}


def discover(paths: Sequence[str], exclude: Sequence[str] = ()) -> list[Path]:
    """Every file under ``paths`` (folders recursively, hidden files left out), minus ``exclude``.

    Raises:
        UserError: A path does not exist, or a folder holds no file.
    """
    found: list[Path] = []
    for raw in paths:
        path = Path(raw).expanduser()
        if not path.exists():
            raise UserError(f"{raw}: no such file or folder")
        if path.is_file():
            if not any(path.match(glob) for glob in exclude):
                found.append(path.resolve())
            continue
        try:
            reader = SimpleDirectoryReader(
                input_dir=str(path), recursive=True, exclude=list(exclude) or None
            )
        except ValueError as exc:  # "No files found in ..."
            raise UserError(f"{raw}: the folder holds no file to index") from exc
        found.extend(Path(p).resolve() for p in reader.input_files)
    return sorted(dict.fromkeys(found))


def sha256_of(path: Path) -> str:
    """The hex SHA-256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_files(
    files: Iterable[Path], known: dict[str, str] | None = None, show_progress: bool = False
) -> tuple[Reading, list[str]]:
    """Read ``files``; those whose hash is in ``known`` unchanged are not read again.

    Returns:
        The reading (files read, files skipped with a reason) and the paths left
        unread because ``known`` already holds their hash.
    """
    from tqdm.auto import tqdm

    known = known or {}
    extractor = _file_extractor()
    files = list(files)
    reading, unchanged = Reading([], []), []
    for path in tqdm(files, desc="Reading files", unit="file", disable=not show_progress):
        key = str(path)
        ext = path.suffix.lower()
        if ext not in SUPPORTED:
            reading.skipped.append(Skipped(key, f"unsupported type {ext or '(no extension)'}"))
            continue
        try:
            digest = sha256_of(path)
        except OSError as exc:
            reading.skipped.append(Skipped(key, f"unreadable: {exc.strerror or exc}"))
            continue
        if known.get(key) == digest:
            unchanged.append(key)
            continue
        try:
            docs = SimpleDirectoryReader.load_file(
                path, lambda _p: {}, extractor, raise_on_error=True
            )
        except Exception as exc:  # any reader's failure: skipped and listed, never fatal
            cause = exc.__cause__ or exc  # the reader's own error, under the loader's wrapper
            text = str(cause).strip()
            reason = (
                f"{type(cause).__name__}: {text.splitlines()[0][:160]}"
                if text
                else type(cause).__name__
            )
            reading.skipped.append(Skipped(key, f"unreadable: {reason}"))
            continue
        read = _join(key, digest, docs)
        if not read.text.strip():
            reading.skipped.append(Skipped(key, "no text in it"))
            continue
        reading.files.append(read)
    return reading, unchanged


def _join(path: str, digest: str, docs: Sequence[Document]) -> ReadFile:
    pages: list[list[Any]] = []
    parts: list[str] = []
    offset = 0
    for doc in docs:
        label = doc.metadata.get("page_label")
        if label is not None:
            pages.append([offset, str(label)])
        parts.append(doc.text)
        offset += len(doc.text) + len(PAGE_BREAK)
    return ReadFile(path=path, sha256=digest, text=PAGE_BREAK.join(parts), pages=pages)


def page_of(pages: Sequence[Sequence[Any]], char: int | None) -> str | None:
    """The label of the page holding character ``char`` (None without pages)."""
    if not pages or char is None:
        return None
    label = None
    for start, name in pages:
        if start > char:
            break
        label = name
    return label
