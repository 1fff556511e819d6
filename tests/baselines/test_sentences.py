"""The sentence-level dense reference (``dense:sentences``): a long document is
found by the one sentence that answers, which its pooled vector drowns."""

from __future__ import annotations

from llama_index.core.schema import Document
from support import BagOfWordsEmbedding

from llama_index_graphrag_ext.baselines import DenseIndex
from llama_index_graphrag_ext.core.nodes import dedupe_by_source, documents_to_chunks

FILLER = [
    "The committee reviewed the quarterly budget and approved the new office lease.",
    "Lunch options were discussed at length, with a preference for the noodle bar.",
    "Several printers on the third floor still need new toner cartridges.",
    "The parking garage will close early on Friday for maintenance work.",
]


def _documents() -> list[Document]:
    # "log" names the lighthouse once, among many sentences about something else;
    # "brochure" is about lighthouses in general and nothing else.
    log = " ".join([*FILLER * 3, "Anna repainted the Skagen lighthouse red in 1998.", *FILLER])
    return [
        Document(id_="log", text=log),
        Document(id_="brochure", text="Lighthouses guide ships. A lighthouse has a lamp."),
        Document(id_="other", text="The bakery sells rye bread and cinnamon buns."),
    ]


def _index() -> DenseIndex:
    chunks = documents_to_chunks(_documents())
    return DenseIndex(chunks, config="sentences", embed_model=BagOfWordsEmbedding())


def test_each_sentence_is_a_node_of_its_document_with_its_window():
    nodes = list(_index().index.docstore.docs.values())
    assert {n.ref_doc_id for n in nodes} == {"log", "brochure", "other"}
    assert sum(n.ref_doc_id == "log" for n in nodes) == 17
    target = next(n for n in nodes if "Skagen" in n.get_content())
    # The node embeds its sentence alone; its neighbours ride along for the answer.
    assert target.get_content(metadata_mode="embed").strip().startswith("Anna repainted")
    assert FILLER[-1] in target.metadata["window"] and FILLER[0] in target.metadata["window"]


def test_a_long_document_ranks_by_its_best_sentence():
    retriever = _index().as_retriever(similarity_top_k=2)  # 5 sentences per passage
    assert retriever.similarity_top_k == 10
    results = retriever.retrieve("Who repainted the Skagen lighthouse?")
    assert dedupe_by_source(results)[0] == "log"
