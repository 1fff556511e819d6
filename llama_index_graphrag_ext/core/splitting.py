"""LlamaIndex's ``SentenceSplitter`` with a sentence step whose time does not grow with a file.

The splitter hands any piece longer than a chunk to NLTK's Punkt tokenizer, and a
file without paragraph breaks is one such piece. NLTK 3.10 runs every regular
expression under a wall-clock limit (5 s), so on a long enough text (about 30 MB
of prose; less on a loaded machine) sentence splitting raises ``TimeoutError``.
:func:`bounded_sentences` gives Punkt blocks of at most :data:`BLOCK_CHARS`,
cut at line breaks (else at a space) with plain string search: each block takes
milliseconds, and the sentences of any text shorter than a block are Punkt's own.
"""

from __future__ import annotations

from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.node_parser.text.utils import split_by_sentence_tokenizer

#: Characters Punkt is given at a time (far below what its time limit allows).
BLOCK_CHARS = 100_000


def blocks(text: str, size: int = BLOCK_CHARS) -> list[str]:
    """``text`` cut into pieces of at most ``size`` characters that join back to it,
    each ending at a line break where there is one, else after a space."""
    out, start = [], 0
    while len(text) - start > size:
        end = start + size
        cut = text.rfind("\n", start, end)
        if cut <= start:
            cut = text.rfind(" ", start, end)
        cut = end if cut <= start else cut + 1
        out.append(text[start:cut])
        start = cut
    out.append(text[start:])
    return out


def bounded_sentences(text: str) -> list[str]:
    """Punkt's sentences of ``text``, found one block at a time (see the module docs)."""
    punkt = split_by_sentence_tokenizer()
    if len(text) <= BLOCK_CHARS:
        return punkt(text)
    return [sentence for block in blocks(text) for sentence in punkt(block)]


def sentence_splitter(chunk_size: int, chunk_overlap: int) -> SentenceSplitter:
    """A ``SentenceSplitter`` of ``chunk_size`` / ``chunk_overlap`` tokens whose sentence
    step is :func:`bounded_sentences`."""
    return SentenceSplitter(
        chunk_size=chunk_size,
        chunk_overlap=chunk_overlap,
        chunking_tokenizer_fn=bounded_sentences,
    )
