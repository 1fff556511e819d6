"""The on-disk state of a :class:`~.index.ChunkQueryLinkIndex` (LP-RAG §3.3-3.4 artefacts).

Next to the suite's manifest and docstore (written by
:class:`~llama_index_graphrag_ext.core.index.GraphIndexBase`), the index keeps
what its build made: the chunk vectors and mutual-kNN graph (§3.3), the query
nodes with their links and vectors (§3.2), the trained link predictor's
weights and training report (§3.4), and the build counts. A loaded index
retrieves without training again: the predictor is inductive (App. B.3).

An ensemble (``ensemble`` > 1) writes member ``i``'s weights to
``link_predictor.{i}.pt`` next to the first member's :data:`MODEL_FILE`; an index
written before ensembles existed has one member.
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
    #: The trained predictors, one per ensemble member (empty: not trained).
    models: list[LinkPredictor] = field(default_factory=list)
    train_reports: list[TrainReport] = field(default_factory=list)
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
    if state.models:
        model = state.models[0]
        for i, member in enumerate(state.models):
            torch.save(member.state_dict(), folder / _model_file(i))
        saved["model"] = {
            "kind": model.kind,
            "in_dim": int(model.lin[0].in_features),
            "hidden": model.hidden,
            "layers": model.num_layers,
            "members": len(state.models),
        }
        reports = [r.to_dict() for r in state.train_reports]
        saved["train_report"] = reports[0] if reports else None
        saved["train_reports"] = reports
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
        for i in range(int(meta.get("members", 1))):
            model = LinkPredictor(meta["kind"], meta["in_dim"], meta["hidden"], meta["layers"])
            model.load_state_dict(torch.load(folder / _model_file(i), weights_only=True))
            state.models.append(model)
        reports = saved.get("train_reports")
        if reports is None:  # written before ensembles: one report at most
            reports = [saved["train_report"]] if saved.get("train_report") else []
        state.train_reports = [TrainReport.from_dict(r) for r in reports]
    return state


def _model_file(member: int) -> str:
    """The weights file of ensemble member ``member`` (the first keeps the old name)."""
    return MODEL_FILE if member == 0 else MODEL_FILE.replace(".pt", f".{member}.pt")
