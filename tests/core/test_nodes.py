import pytest
from llama_index.core.schema import Document

from llama_index_graphrag_ext.core.nodes import (
    EVIDENCE_KEY,
    DuplicateDocumentError,
    chunk_id,
    dedupe_by_source,
    documents_to_chunks,
    prepare_documents,
    with_evidence,
)


def test_prepare_documents_counts_what_it_skips(caplog):
    docs = [
        Document(id_="a", text="Alpha."),
        Document(id_="b", text="   \n"),
        Document(id_="a", text="Alpha."),
        Document(id_="c", text="Gamma."),
    ]
    kept, report = prepare_documents(docs)
    assert [d.doc_id for d in kept] == ["a", "c"]
    assert report.as_dict() == {
        "received": 4,
        "kept": 2,
        "empty_skipped": 1,
        "duplicates_skipped": 1,
        "unencodable_repaired": 0,
    }
    assert "empty" in caplog.text and "duplicate" in caplog.text


def test_conflicting_duplicates_raise_unless_a_policy_is_chosen():
    docs = [Document(id_="a", text="one"), Document(id_="a", text="two")]
    with pytest.raises(DuplicateDocumentError):
        prepare_documents(docs)
    assert prepare_documents(docs, on_duplicate="keep-first")[0][0].text == "one"
    assert prepare_documents(docs, on_duplicate="keep-last")[0][0].text == "two"


def test_chunks_point_back_and_ids_are_content_addressed():
    doc = Document(id_="d1", text="Some text.", metadata={"title": "T"})
    (chunk,) = documents_to_chunks([doc])
    assert chunk.ref_doc_id == "d1" and chunk.metadata["title"] == "T"
    assert chunk.node_id == chunk_id("d1", 0, "Some text.")
    assert documents_to_chunks([doc])[0].node_id == chunk.node_id


def test_with_evidence_copies_and_hides_evidence_from_llm():
    (chunk,) = documents_to_chunks([Document(id_="d1", text="Body.")])
    result = with_evidence(chunk, 0.5, {"method": "x", "why": "because"})
    assert result.node.metadata[EVIDENCE_KEY]["why"] == "because"
    assert EVIDENCE_KEY not in chunk.metadata  # the stored node is untouched
    assert "because" not in result.node.get_content(metadata_mode="llm")
    assert dedupe_by_source([result, result]) == ["d1"]
