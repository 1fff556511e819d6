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


# --------------------------------------------------------------------------- the seal


def test_every_file_is_sealed_and_damage_that_still_parses_is_named(tmp_path):
    target = tmp_path / "idx"
    _write_index(target, {"ids": ["a", "b"]})
    manifest = json.loads((target / "manifest.json").read_text())
    assert set(manifest["sealed_files"]) == {"data.json"}
    (target / "data.json").write_text("{}")  # valid JSON, wrong content
    with pytest.raises(IndexFormatError, match=r"data\.json is damaged"):
        read_manifest(target)
    (target / "data.json").unlink()
    with pytest.raises(IndexFormatError, match=r"data\.json is missing"):
        read_manifest(target)


def test_an_edited_manifest_is_named(tmp_path):
    target = tmp_path / "idx"
    _write_index(target, "v1")
    data = json.loads((target / "manifest.json").read_text())
    (target / "manifest.json").write_text(json.dumps({**data, "note": "v2"}))
    with pytest.raises(IndexFormatError, match=r"manifest\.json was changed after it was written"):
        read_manifest(target)


def test_a_seal_may_not_name_files_outside_the_folder(tmp_path):
    from llama_index_graphrag_ext.core.persist import CHECKSUM, verify
    from llama_index_graphrag_ext.core.persist import _json_digest as digest

    target = tmp_path / "idx"
    _write_index(target, "v1")
    data = json.loads((target / "manifest.json").read_text())
    data["sealed_files"]["../outside.txt"] = {"bytes": 1, "sha256": "0" * 64}
    data[CHECKSUM] = digest(data)
    assert any("outside the folder" in p for p in verify(target, data))


def test_an_array_archive_bomb_is_refused(tmp_path):
    import zipfile

    path = tmp_path / "bomb.npz"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("a.npy", b"\0" * (200 * 2**20))  # 200 MB of zeros: ~200 KB stored
    assert path.stat().st_size < 2**20
    with pytest.raises(IndexFormatError, match="would expand"):
        read_arrays(path)


def test_a_gzip_bomb_graph_is_refused(tmp_path):
    import gzip

    from llama_index_graphrag_ext.core import graph_format

    path = tmp_path / "graph.json.gz"
    with gzip.open(path, "wb") as fh:
        for _ in range(200):
            fh.write(b" " * 2**20)  # 200 MB of spaces
    with pytest.raises(ValueError, match="expands beyond"):
        graph_format.read(path)
