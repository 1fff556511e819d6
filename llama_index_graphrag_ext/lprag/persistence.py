"""The on-disk state of a :class:`~.index.ChunkQueryLinkIndex` (LP-RAG §3.3-3.4 artefacts).

Chunk vectors and graph, query nodes, the predictors' weights and training
reports; a loaded index retrieves without training again (App. B.3).
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
from .training import TrainReport

MODEL_FILE = "link_predictor.pt"
STATE_FILE = "lprag_state.json"
WINDOWS = "chunk_windows"


@dataclass
class LinkIndexState:
    """What a :class:`~.index.ChunkQueryLinkIndex` writes besides the manifest and docstore."""

    chunks: InMemoryVectorTable
    edges: Edges
    queries: QueryTable
    #: The trained predictors, one per ensemble member (empty: not trained).
    models: list[LinkPredictor] = field(default_factory=list)
    train_reports: list[TrainReport] = field(default_factory=list)
    build_stats: dict[str, Any] = field(default_factory=dict)
    #: Long chunks' windows.
    windows: InMemoryVectorTable = field(default_factory=InMemoryVectorTable)


def write_state(folder: Path, state: LinkIndexState) -> None:
    """Write ``state`` into ``folder`` (the index's temporary folder; see ``persist``)."""
    state.chunks.persist(folder, "chunks")
    state.windows.persist(folder, WINDOWS)
    rows, cols, weights = state.edges
    write_arrays(folder / "chunk_graph.npz", rows=rows, cols=cols, weights=weights)
    write_arrays(folder / "queries.npz", matrix=state.queries.vectors)
    write_json(folder / "queries.json", state.queries.records(state.chunks.ids))
    saved: dict[str, Any] = {"build_stats": state.build_stats, "model": None}
    if state.models:
        model = state.models[0]
        for i, member in enumerate(state.models):
            torch.save(member.state_dict(), folder / _model_file(i))
        saved["model"] = {
            "kind": model.kind,
            "in_dim": model.in_dim,
            "hidden": model.hidden,
            "layers": model.num_layers,
            "members": len(state.models),
        }
        saved["train_reports"] = [r.to_dict() for r in state.train_reports]
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
    state = LinkIndexState(
        chunks,
        edges,
        queries,
        build_stats=saved["build_stats"],
        windows=InMemoryVectorTable.load(folder, WINDOWS),
    )
    meta = saved["model"]
    if meta is not None:
        for i in range(meta["members"]):
            model = LinkPredictor(meta["kind"], meta["in_dim"], meta["hidden"], meta["layers"])
            model.load_state_dict(torch.load(folder / _model_file(i), weights_only=True))
            state.models.append(model)
        state.train_reports = [TrainReport.from_dict(r) for r in saved["train_reports"]]
    return state


def _model_file(member: int) -> str:
    return MODEL_FILE if member == 0 else MODEL_FILE.replace(".pt", f".{member}.pt")
