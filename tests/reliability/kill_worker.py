"""An indexing job for ``test_kill.py`` to SIGKILL at a chosen point (not a test module).

Usage: ``python kill_worker.py METHOD FOLDER KILL_AT MARKER``. The job builds an
index of the first two documents of the reliability corpus, persists it, then
inserts the other documents one at a time, persisting after each. On its third
persist (or during the third document's insert, for ``build``) it writes
``MARKER`` and hangs until killed:

* ``persist-write``: every file is written to the temporary folder, none swapped in;
* ``persist-swap``: the old index has been renamed aside, the new one not yet in place;
* ``build``: the index is embedding the new document (after two good persists).
"""

from __future__ import annotations

import importlib.util
import os
import sys
import time
from pathlib import Path

from llama_index.core.schema import Document

import llama_index_graphrag_ext.core.persist as persist
from llama_index_graphrag_ext.core.hash_embedding import HashEmbedding

HERE = Path(__file__).resolve().parent
spec = importlib.util.spec_from_file_location("reliability_conftest", HERE / "conftest.py")
fixtures = importlib.util.module_from_spec(spec)
sys.modules["reliability_conftest"] = fixtures
spec.loader.exec_module(fixtures)

EXTRA = {
    "nile": "The Nile is a river in Africa. The Nile flows through Egypt and Sudan.",
    "cairo": "Cairo is the capital of Egypt. Cairo lies on the river Nile.",
}


def documents() -> list[Document]:
    extra = [Document(id_=k, text=v, metadata={"title": k}) for k, v in EXTRA.items()]
    return fixtures.corpus(extra)


def hang(marker: str) -> None:
    Path(marker).write_text(str(os.getpid()))
    time.sleep(600)


def main(method: str, folder: str, kill_at: str, marker: str) -> None:
    embed = HashEmbedding(embed_batch_size=16)
    docs = documents()
    persists = 0

    fsync_tree = persist._fsync_tree

    def fsync_then_maybe_hang(tmp: Path) -> None:
        fsync_tree(tmp)
        if kill_at == "persist-write" and persists == 2:
            hang(marker)

    real_replace = os.replace

    def replace_then_maybe_hang(src, dst) -> None:
        real_replace(src, dst)
        if kill_at == "persist-swap" and persists == 2 and str(dst).endswith(".old"):
            hang(marker)

    persist._fsync_tree = fsync_then_maybe_hang
    os.replace = replace_then_maybe_hang

    index = fixtures.build_index(method, docs[:2], embed)
    index.persist(folder)
    persists += 1
    for position, doc in enumerate(docs[2:]):
        if kill_at == "build" and position == 1:
            original = embed._get_text_embedding

            def embed_then_hang(text: str, original=original) -> list[float]:
                hang(marker)
                return original(text)

            object.__setattr__(embed, "_get_text_embedding", embed_then_hang)
        index.insert(doc)
        index.persist(folder)
        persists += 1
    Path(marker).write_text("finished without being killed")


if __name__ == "__main__":
    main(*sys.argv[1:5])
