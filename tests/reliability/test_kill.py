"""An indexing process SIGKILLed mid-way leaves its last persisted index loadable, and resumes.

``kill_worker.py`` builds an index, persists it after every inserted document,
and hangs at a chosen point of its third persist (or of its third document's
insert); the test kills it with SIGKILL there, loads what is on disk, and
finishes the job by inserting what is missing.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

WORKER = Path(__file__).with_name("kill_worker.py")
TOTAL_DOCS = 6
LAST_GOOD = 3  # documents in the index persisted just before the kill point

CASES = [
    ("qcg", "persist-write"),
    ("qcg", "persist-swap"),
    ("qcg", "build"),
    ("cue", "persist-write"),
    ("cue", "persist-swap"),
    ("chainrag", "persist-write"),
    ("chainrag", "build"),
    ("lprag", "persist-write"),
    ("lprag", "build"),
    ("fgrag", "persist-write"),
    ("fgrag", "persist-swap"),
]


def index_class(method: str):
    if method == "qcg":
        from llama_index_graphrag_ext.qcg import QueryCentricGraphIndex as cls
    elif method == "cue":
        from llama_index_graphrag_ext.cue import MultiPartiteIndex as cls
    elif method == "chainrag":
        from llama_index_graphrag_ext.chainrag import SentenceGraphIndex as cls
    elif method == "lprag":
        from llama_index_graphrag_ext.lprag import ChunkQueryLinkIndex as cls
    else:
        from llama_index_graphrag_ext.fgrag import FGRAGIndex as cls
    return cls


def indexed_documents(method: str, index) -> set[str]:
    return {n.ref_doc_id for n in index.get_chunks(index.chunk_ids())}


def run_until_marker(method: str, folder: Path, kill_at: str, marker: Path) -> int:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    proc = subprocess.Popen(
        [sys.executable, str(WORKER), method, str(folder), kill_at, str(marker)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        # Generous: the worker imports the whole stack first. Not a speed check.
        deadline = time.monotonic() + 300
        while not marker.exists():
            if proc.poll() is not None:
                out = proc.stdout.read().decode(errors="replace")
                pytest.fail(f"worker exited with {proc.returncode} before the kill point:\n{out}")
            if time.monotonic() > deadline:
                pytest.fail("worker never reached the kill point")
            time.sleep(0.05)
        assert marker.read_text() == str(proc.pid), marker.read_text()
        os.kill(proc.pid, signal.SIGKILL)
        return proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize(("method", "kill_at"), CASES)
def test_sigkill_leaves_the_last_persisted_index_and_resuming_finishes(
    method, kill_at, tmp_path, hash_embed, docs_with
):
    folder = tmp_path / "index"
    code = run_until_marker(method, folder, kill_at, tmp_path / "killed-here")
    assert code == -signal.SIGKILL
    if kill_at == "persist-swap":
        # Killed between the two renames: only the renamed-aside copy exists.
        assert not folder.exists() and (tmp_path / ".index.old").is_dir()

    cls = index_class(method)
    index = cls.load(folder, embed_model=hash_embed)  # recovers an interrupted swap
    assert folder.is_dir() and not (tmp_path / ".index.old").exists()
    docs = docs_with(*_extra_docs())
    expected_first = {d.doc_id for d in docs[:LAST_GOOD]}
    assert indexed_documents(method, index) == expected_first
    # Resume: insert what the killed job had not persisted, then persist again.
    for doc in docs:
        if doc.doc_id not in expected_first:
            index.insert(doc)
    index.persist(folder)
    final = cls.load(folder, embed_model=hash_embed)
    assert indexed_documents(method, final) == {d.doc_id for d in docs}
    if method == "fgrag":
        assert final.stats()["chunks"] == TOTAL_DOCS
    else:
        assert len(final) == TOTAL_DOCS and len(set(final.chunk_ids())) == TOTAL_DOCS
    retriever = final.as_retriever(similarity_top_k=2)
    found = [r.node.ref_doc_id for r in retriever.retrieve("Cairo is the capital of Egypt")]
    assert "cairo" in found


def _extra_docs():
    from llama_index.core.schema import Document

    from_worker = {
        "nile": "The Nile is a river in Africa. The Nile flows through Egypt and Sudan.",
        "cairo": "Cairo is the capital of Egypt. Cairo lies on the river Nile.",
    }
    return [Document(id_=k, text=v, metadata={"title": k}) for k, v in from_worker.items()]
