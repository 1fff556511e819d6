"""The on-disk state of a :class:`~.index.ChunkQueryLinkIndex` (LP-RAG §3.3-3.4 artefacts).

Next to the suite's manifest and docstore (written by
:class:`~llama_index_graphrag_ext.core.index.GraphIndexBase`), the index keeps
what its build made: the chunk vectors and mutual-kNN graph (§3.3), the query
nodes with their links and vectors (§3.2), the trained link predictor's
weights and training report (§3.4), and the build counts. A loaded index
retrieves without training again: the predictor is inductive (App. B.3).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..core.persist import read_arrays, read_json, write_arrays, write_json
from ..core.vectors import InMemoryVectorTable
from .chunk_graph import Edges
from .predictor import LinkPredictor
from .query_table import QueryTable
from .train_config import TrainReport

MODEL_FILE = "link_predictor.pt"
STATE_FILE = "lprag_state.json"
WINDOWS = "chunk_windows"


@dataclass
class LinkIndexState:
    """What a :class:`~.index.ChunkQueryLinkIndex` writes besides the manifest and docstore."""

    chunks: InMemoryVectorTable
    edges: Edges
    queries: QueryTable
    model: LinkPredictor | None = None
    train_report: TrainReport | None = None
    build_stats: dict[str, Any] = field(default_factory=dict)
    #: Long chunks' windows (``None``: an index persisted before they were kept).
    windows: InMemoryVectorTable | None = None


def write_state(folder: Path, state: LinkIndexState) -> None:
    """Write ``state`` into ``folder`` (the index's temporary folder; see ``persist``)."""
    state.chunks.persist(folder, "chunks")
    if state.windows is not None:
        state.windows.persist(folder, WINDOWS)
    rows, cols, weights = state.edges
    write_arrays(folder / "chunk_graph.npz", rows=rows, cols=cols, weights=weights)
    write_arrays(folder / "queries.npz", matrix=state.queries.vectors)
    write_json(folder / "queries.json", state.queries.records(state.chunks.ids))
    saved: dict[str, Any] = {"build_stats": state.build_stats, "model": None}
    model = state.model
    if model is not None:
        torch.save(model.state_dict(), folder / MODEL_FILE)
        saved["model"] = {
            "kind": model.kind,
            "in_dim": int(model.lin[0].in_features),
            "hidden": model.hidden,
            "layers": model.num_layers,
        }
        saved["train_report"] = state.train_report.to_dict() if state.train_report else None
    write_json(folder / STATE_FILE, saved)


def read_state(folder: Path) -> LinkIndexState:
    """The state :func:`write_state` wrote into ``folder``."""
    chunks = InMemoryVectorTable.load(folder, "chunks")
    arrays = read_arrays(folder / "chunk_graph.npz")
    edges = (arrays["rows"], arrays["cols"], arrays["weights"].astype(np.float32))
    row_of = {cid: i for i, cid in enumerate(chunks.ids)}
    queries = QueryTable.from_records(
        read_json(folder / "queries.json"),
        row_of,
        read_arrays(folder / "queries.npz")["matrix"].astype(np.float32),
    )
    saved = read_json(folder / STATE_FILE)
    state = LinkIndexState(chunks, edges, queries, build_stats=dict(saved.get("build_stats", {})))
    if (folder / f"{WINDOWS}.ids.json").is_file():
        state.windows = InMemoryVectorTable.load(folder, WINDOWS)
    meta = saved.get("model")
    if meta is not None:
        model = LinkPredictor(meta["kind"], meta["in_dim"], meta["hidden"], meta["layers"])
        model.load_state_dict(torch.load(folder / MODEL_FILE, weights_only=True))
        state.model = model
        if saved.get("train_report"):
            state.train_report = TrainReport.from_dict(saved["train_report"])
    return state
