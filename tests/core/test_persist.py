import json

import numpy as np
import pytest

from llama_index_graphrag_ext.core.persist import (
    IndexFormatError,
    atomic_dir,
    read_arrays,
    read_manifest,
    recover,
    write_arrays,
    write_manifest,
)


def _write_index(target, payload, fail=False):
    with atomic_dir(target) as tmp:
        write_manifest(tmp, "test-index", 1, note=payload)
        (tmp / "data.json").write_text(json.dumps(payload))
        if fail:
            raise RuntimeError("disk full, say")


def test_atomic_write_replaces_the_folder(tmp_path):
    target = tmp_path / "idx"
    _write_index(target, "v1")
    _write_index(target, "v2")
    assert json.loads((target / "data.json").read_text()) == "v2"
    assert read_manifest(target, "test-index", 1)["note"] == "v2"
    assert [p.name for p in tmp_path.iterdir()] == ["idx"]  # no temp folders left


def test_failure_mid_write_leaves_the_old_index_intact(tmp_path):
    target = tmp_path / "idx"
    _write_index(target, "v1")
    with pytest.raises(RuntimeError):
        _write_index(target, "v2", fail=True)
    assert json.loads((target / "data.json").read_text()) == "v1"
    assert [p.name for p in tmp_path.iterdir()] == ["idx"]


def test_crash_between_renames_is_recovered(tmp_path):
    target = tmp_path / "idx"
    _write_index(target, "v1")
    target.rename(tmp_path / ".idx.old")  # as if the process died mid-swap
    assert recover(target)
    assert read_manifest(target)["note"] == "v1"


def test_manifest_checks_kind_and_version(tmp_path):
    target = tmp_path / "idx"
    _write_index(target, "x")
    with pytest.raises(IndexFormatError, match="not 'other'"):
        read_manifest(target, "other")
    with pytest.raises(IndexFormatError, match="format version 1"):
        read_manifest(target, "test-index", (2, 3))
    with pytest.raises(IndexFormatError, match="missing"):
        read_manifest(tmp_path / "nothing-here")


def test_arrays_round_trip_without_pickle(tmp_path):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    write_arrays(tmp_path / "a.npz", a=a, ids=np.array(["x", "y", "z"]))
    back = read_arrays(tmp_path / "a.npz")
    assert np.array_equal(back["a"], a) and back["ids"].tolist() == ["x", "y", "z"]
