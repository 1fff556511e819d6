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
import os
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import UserError

if TYPE_CHECKING:  # `query` and `info` use this module's page_of: no model stack for them
    from llama_index.core.schema import Document

logger = logging.getLogger(__name__)

#: Extensions read as plain text (``SimpleDirectoryReader``'s default for unknown types).
TEXT_EXTENSIONS = (".txt", ".md", ".markdown", ".rst", ".text")
#: Extensions with a reader of their own (``llama-index-readers-file``).
RICH_EXTENSIONS = (".html", ".htm", ".pdf", ".docx")
SUPPORTED = TEXT_EXTENSIONS + RICH_EXTENSIONS
#: Joins the pages of a multi-page file.
PAGE_BREAK = "\n\n"


#: Longer texts are skipped (listed and counted): one file must not stop a whole folder,
#: and 16 million characters is already a day of embedding on a laptop's CPU.
MAX_TEXT_CHARS = 16_000_000


@dataclass
class ReadFile:
    """One file read into one document's text."""

    path: str
    sha256: str
    text: str
    #: ``[start_char, page label]`` of each page (empty for one-page formats).
    pages: list[list[Any]] = field(default_factory=list)
    #: How a plain-text file was decoded, and how many characters could not be.
    encoding: str | None = None
    undecodable: int = 0

    def document(self) -> Document:
        """The file as a LlamaIndex ``Document`` whose id is its path, titled by its first
        heading where it has one (never by its file name: a file named after a topic
        would tie every chunk of it to that topic)."""
        from llama_index.core.schema import Document

        metadata = {"file_path": self.path, "file_name": Path(self.path).name}
        title = heading_of(self.text)
        if title:
            metadata["title"] = title
        return Document(
            text=self.text,
            id_=self.path,
            metadata=metadata,
            excluded_embed_metadata_keys=["file_path", "file_name"],
            excluded_llm_metadata_keys=["file_path"],
        )


#: Longest line taken as a title.
MAX_TITLE_CHARS = 120


def heading_of(text: str) -> str | None:
    """The first heading of ``text``: a Markdown ``#`` line, a reStructuredText title
    (a line underlined with ``=``, ``-``, ``~``, ...), or a short first line standing
    alone above a blank line; ``None`` when the text opens with prose."""
    lines = text.lstrip("\ufeff").splitlines()[:40]
    for i, line in enumerate(lines):
        stripped = line.strip()
        if stripped.startswith("#"):
            heading = stripped.lstrip("#").strip()
            if heading and len(heading) <= MAX_TITLE_CHARS:
                return heading
        nxt = lines[i + 1].strip() if i + 1 < len(lines) else ""
        if stripped and len(nxt) >= 3 and len(set(nxt)) == 1 and nxt[0] in "=-~*^#":
            return stripped if len(stripped) <= MAX_TITLE_CHARS else None
        if stripped:  # the first text line: a title only if short and alone
            alone = not nxt and stripped[-1:] not in ".,;:!?"
            return stripped if alone and len(stripped) <= MAX_TITLE_CHARS // 2 else None
    return None


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


def discover(
    paths: Sequence[str], exclude: Sequence[str] = (), include: Sequence[str] = ()
) -> list[Path]:
    """Every file under ``paths`` (folders recursively, hidden files left out), minus
    ``exclude``; with ``include``, only the files matching one of its globs.

    Raises:
        UserError: A path does not exist, or a folder holds no file.
    """
    from llama_index.core import SimpleDirectoryReader

    found: list[Path] = []
    for raw in paths:
        path = Path(raw).expanduser()
        if not path.exists():
            raise UserError(f"{raw}: no such file or folder")
        if path.is_file():
            if not any(path.match(glob) for glob in exclude):
                found.append(_resolved(path))
            continue
        try:
            reader = SimpleDirectoryReader(
                input_dir=str(path), recursive=True, exclude=list(exclude) or None
            )
        except ValueError as exc:  # "No files found in ..."
            raise UserError(f"{raw}: the folder holds no file to index") from exc
        found.extend(_resolved(Path(p)) for p in reader.input_files)
    if include:
        found = [p for p in found if any(p.match(glob) for glob in include)]
    return sorted(dict.fromkeys(found))


def _resolved(path: Path) -> Path:
    """``path`` resolved; a symlink loop as it is (reading it then fails, listed and counted)."""
    try:
        return path.resolve(strict=True)
    except (OSError, RuntimeError):
        return path.absolute()


_BOMS = (
    (b"\xef\xbb\xbf", "utf-8-sig"),
    (b"\xff\xfe\x00\x00", "utf-32"),
    (b"\x00\x00\xfe\xff", "utf-32"),
    (b"\xff\xfe", "utf-16"),
    (b"\xfe\xff", "utf-16"),
)


def decode(data: bytes) -> tuple[str, str, int]:
    """``(text, encoding, undecodable characters)`` of a plain-text file's bytes.

    A byte-order mark decides; else UTF-8 when the bytes are UTF-8; else the
    encoding ``charset-normalizer`` finds likeliest (Latin-1, Windows-1252,
    UTF-16 without a mark, ...). Bytes that still do not decode become U+FFFD
    and are counted, never dropped silently.
    """
    encoding = next((name for bom, name in _BOMS if data.startswith(bom)), None)
    if encoding is None:
        try:
            return data.decode("utf-8"), "utf-8", 0
        except UnicodeDecodeError:
            encoding = _legacy_encoding(data)
    text = data.decode(encoding, errors="replace")
    return text, encoding, text.count("\ufffd") - _replacement_chars(data, encoding)


# charset-normalizer tells Western single-byte encodings apart poorly on short texts (a
# German Latin-1 file comes back as mac_iceland): any of them is read as Windows-1252,
# the superset of Latin-1 that most such files are written in.
_WESTERN = frozenset(
    [
        "cp1252",
        "cp1250",
        "cp1254",
        "cp1257",
        "latin_1",
        "iso8859_1",
        "iso8859_2",
        "iso8859_9",
        "iso8859_15",
        "mac_roman",
        "mac_iceland",
        "mac_latin2",
        "mac_turkish",
        "cp437",
        "cp850",
        "cp858",
    ]
)


class NotText(ValueError):
    """The bytes are not text in any encoding (a binary file under a text name)."""


def _legacy_encoding(data: bytes) -> str:
    from charset_normalizer import from_bytes

    best = from_bytes(data).best()
    if best is None:  # no encoding makes these bytes readable text
        raise NotText("binary content, not text in any encoding")
    if best.encoding in _WESTERN or best.coherence < 0.2:
        return "cp1252"
    return best.encoding


def _replacement_chars(data: bytes, encoding: str) -> int:
    """U+FFFD characters the file itself holds (not decoding errors)."""
    mark = "\ufffd".encode(encoding.replace("-sig", ""), errors="ignore")
    return data.count(mark) if mark else 0


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
    from llama_index.core import SimpleDirectoryReader
    from llama_index.core.schema import Document
    from tqdm.auto import tqdm

    known = known or {}
    extractor = _file_extractor()
    files = list(files)
    reading, unchanged = Reading([], []), []
    for path in tqdm(files, desc="Reading files", unit="file", disable=not show_progress):
        key = str(path)
        ext = path.suffix.lower()
        if not _utf8(key):  # ids, JSON and stores all hold the name as UTF-8
            shown = os.fsencode(key).decode("utf-8", errors="backslashreplace")
            reading.skipped.append(Skipped(shown, "its name is not valid UTF-8: rename the file"))
            continue
        plain = ext in TEXT_EXTENSIONS or not ext  # README, NEWS, ...: text if they decode
        if not plain and ext not in SUPPORTED:
            reading.skipped.append(Skipped(key, f"unsupported type {ext}"))
            continue
        try:
            info = path.stat()
            if not stat.S_ISREG(info.st_mode):  # a FIFO would block the run, a device never end
                reading.skipped.append(
                    Skipped(key, "not a regular file (a pipe, socket or device)")
                )
                continue
            if plain and info.st_size > 4 * MAX_TEXT_CHARS:  # 4 bytes a character at most
                reading.skipped.append(Skipped(key, _too_long(f"{info.st_size:,} bytes")))
                continue
            digest = sha256_of(path)
        except OSError as exc:
            reading.skipped.append(Skipped(key, f"unreadable: {exc.strerror or exc}"))
            continue
        if known.get(key) == digest:
            unchanged.append(key)
            continue
        encoding, undecodable = None, 0
        try:
            if plain:
                text, encoding, undecodable = decode(path.read_bytes())
                docs = [Document(text=text)]
            else:
                docs = SimpleDirectoryReader.load_file(
                    path, lambda _p: {}, extractor, raise_on_error=True
                )
        except Exception as exc:  # any reader's failure: skipped and listed, never fatal
            cause = _cause(exc)
            text = str(cause).strip()
            reason = (
                f"{type(cause).__name__}: {text.splitlines()[0][:160]}"
                if text
                else type(cause).__name__
            )
            reason = str(cause) if isinstance(cause, NotText) else f"unreadable: {reason}"
            reading.skipped.append(Skipped(key, reason))
            continue
        read = _join(key, digest, docs)
        read.encoding, read.undecodable = encoding, undecodable
        if not read.text.strip():
            reading.skipped.append(Skipped(key, "no text in it"))
            continue
        if len(read.text) > MAX_TEXT_CHARS:
            reading.skipped.append(Skipped(key, _too_long(f"{len(read.text):,} characters")))
            continue
        reading.files.append(read)
    return reading, unchanged


def _utf8(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:  # undecodable bytes of the name, kept as lone surrogates
        return False
    return True


def _cause(exc: BaseException) -> BaseException:
    """The reader's own error, under the loader's wrapper and a retry's."""
    cause = exc.__cause__ or exc
    last = getattr(cause, "last_attempt", None)  # tenacity's RetryError
    if last is not None and last.exception() is not None:
        cause = last.exception()
    return cause


def _too_long(size: str) -> str:
    return f"too long: {size} (the limit is {MAX_TEXT_CHARS:,} characters); split it into smaller files"


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
