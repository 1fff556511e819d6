"""The dense baseline's build (baselines/dense.py): streamed in batches, same index as one shot."""

from __future__ import annotations

import pytest
from llama_index.core import StorageContext, VectorStoreIndex, load_index_from_storage
from llama_index.core.schema import Document, MetadataMode
from support import BagOfWordsEmbedding

from llama_index_graphrag_ext.baselines import DenseRetriever, build_dense_index
from llama_index_graphrag_ext.baselines import dense as dense_module
from llama_index_graphrag_ext.baselines.numpy_store import NumpyVectorStore
from llama_index_graphrag_ext.core.compact_store import compact_storage_context
from llama_index_graphrag_ext.core.embeddings import embed_texts
from llama_index_graphrag_ext.core.nodes import documents_to_chunks

TOPICS = [
    "Warsaw is the capital of Poland on the Vistula.",
    "The Danube flows through Vienna and Budapest.",
    "Marie Curie was born in Warsaw and won two Nobel prizes.",
    "Budapest has thermal baths along the Danube.",
    "The Vistula is the longest river in Poland.",
    "Vienna is known for classical music and coffee houses.",
    "Pierre Curie shared the 1903 Nobel prize in physics.",
    "Krakow was the royal capital of Poland for centuries.",
    "The Tisza joins the Danube in Serbia.",
    "Chopin left Warsaw for Paris in 1830.",
    "Salzburg is the birthplace of Mozart.",
]
QUERIES = ["Which river runs through Budapest?", "Where was Marie Curie born?", "capital of Poland"]


class RecordingEmbedding(BagOfWordsEmbedding):
    """Bag-of-words vectors that remember every batch of texts they were given."""

    calls: list = []

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        return super()._get_text_embeddings(texts)


@pytest.fixture
def documents() -> list[Document]:
    return [
        Document(id_=f"d{i}", text=text, metadata={"title": f"T{i}"})
        for i, text in enumerate(TOPICS)
    ]


def _ranked(index: VectorStoreIndex, k: int = 5) -> list[list[tuple[str, float]]]:
    retriever = index.as_retriever(similarity_top_k=k)
    return [[(r.node.node_id, round(r.score, 6)) for r in retriever.retrieve(q)] for q in QUERIES]


def test_batched_build_ranks_like_a_one_shot_vector_index(documents, monkeypatch):
    embed = BagOfWordsEmbedding(embed_batch_size=4)
    monkeypatch.setattr(dense_module, "_INSERT_BATCH", 3)  # four batches, the last short
    streamed = build_dense_index(documents, embed)
    one_shot = VectorStoreIndex(
        documents_to_chunks(documents),
        embed_model=embed,
        storage_context=compact_storage_context(vector_store=NumpyVectorStore()),
    )
    assert _ranked(streamed) == _ranked(one_shot)
    assert len(streamed.index_struct.nodes_dict) == len(documents)
    # Every chunk is in the docstore, with its text and metadata.
    for node in documents_to_chunks(documents):
        stored = streamed.docstore.get_node(node.node_id)
        assert stored.text == node.text and stored.metadata == node.metadata


def test_embedder_sees_the_same_batches_as_one_call_over_the_corpus(documents, monkeypatch):
    # Streaming the nodes must not change what is embedded, nor how it is
    # batched (batch shapes can change a real model's floats).
    monkeypatch.setattr(dense_module, "_INSERT_BATCH", 2)
    embed = RecordingEmbedding(embed_batch_size=4)
    embed.calls = []
    build_dense_index(documents, embed)
    streamed_calls = embed.calls
    embed.calls = []
    texts = [
        n.get_content(metadata_mode=MetadataMode.EMBED) for n in documents_to_chunks(documents)
    ]
    embed_texts(embed, texts)
    assert streamed_calls == embed.calls


def test_index_struct_is_stored_once_built_and_the_index_reloads(documents, tmp_path, monkeypatch):
    monkeypatch.setattr(dense_module, "_INSERT_BATCH", 4)
    embed = BagOfWordsEmbedding(embed_batch_size=4)
    index = build_dense_index(documents, embed)
    stored = index.storage_context.index_store.get_index_struct(index.index_id)
    assert stored is not None and len(stored.nodes_dict) == len(documents)
    index.storage_context.persist(persist_dir=str(tmp_path))
    store = NumpyVectorStore.from_persist_path(str(tmp_path / "default__vector_store.json"))
    reloaded = load_index_from_storage(
        StorageContext.from_defaults(persist_dir=str(tmp_path), vector_store=store),
        embed_model=embed,
    )
    assert _ranked(reloaded) == _ranked(index)


def test_inserts_after_a_streamed_build_are_found(documents, monkeypatch):
    monkeypatch.setattr(dense_module, "_INSERT_BATCH", 5)
    embed = BagOfWordsEmbedding(embed_batch_size=4)
    index = build_dense_index(documents, embed)
    extra = Document(id_="late", text="Gdansk is a port city on the Baltic coast.")
    index.insert_nodes(documents_to_chunks([extra]))
    top = DenseRetriever(index, similarity_top_k=1).retrieve("port city on the Baltic")
    assert top[0].node.ref_doc_id == "late"
    assert len(index.index_struct.nodes_dict) == len(documents) + 1


def test_empty_and_duplicate_documents_are_skipped(documents):
    embed = BagOfWordsEmbedding(embed_batch_size=4)
    noisy = [*documents, Document(id_="blank", text="   "), documents[0]]
    index = build_dense_index(noisy, embed)
    assert len(index.index_struct.nodes_dict) == len(documents)
