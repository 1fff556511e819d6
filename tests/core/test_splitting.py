"""The sentence splitter's step never gives NLTK's Punkt more than one block at a time."""

from __future__ import annotations

from llama_index.core import Document
from llama_index.core.node_parser import SentenceSplitter

from llama_index_graphrag_ext.core import splitting

PROSE = "The café in Zürich opened in 1901. It was run by Mrs. Müller for years. "


def test_blocks_join_back_and_end_at_line_breaks_or_spaces():
    text = ("line one of many. " * 30 + "\n") * 50 + "x" * 2500
    parts = splitting.blocks(text, size=1000)
    assert "".join(parts) == text
    assert all(len(p) <= 1000 for p in parts)
    assert all(p.endswith(("\n", " ")) for p in parts[:-3])  # the last: one long word, cut


def test_short_texts_split_as_llama_index_splits_them():
    doc = Document(text=PROSE * 40)
    ours = splitting.sentence_splitter(200, 20).get_nodes_from_documents([doc])
    stock = SentenceSplitter(chunk_size=200, chunk_overlap=20).get_nodes_from_documents([doc])
    assert [n.text for n in ours] == [n.text for n in stock]


def test_a_long_text_is_given_to_punkt_a_block_at_a_time(monkeypatch):
    seen: list[int] = []
    real = splitting.split_by_sentence_tokenizer

    def recording():
        punkt = real()
        return lambda text: (seen.append(len(text)), punkt(text))[1]

    monkeypatch.setattr(splitting, "split_by_sentence_tokenizer", recording)
    monkeypatch.setattr(splitting, "BLOCK_CHARS", 2_000)
    monkeypatch.setattr(splitting.blocks, "__defaults__", (2_000,))
    text = (PROSE * 5 + "\n") * 100  # one paragraph of ~37,000 characters
    nodes = splitting.sentence_splitter(256, 0).get_nodes_from_documents([Document(text=text)])
    assert max(seen) <= 2_000 and len(seen) > 10
    assert "".join(n.text for n in nodes).replace(" ", "").replace("\n", "") == text.replace(
        " ", ""
    ).replace("\n", "")
