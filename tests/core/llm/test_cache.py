"""Tests for the sqlite LLM response cache, cache keys and LLM fingerprints."""

from __future__ import annotations

import sqlite3
import threading
from types import SimpleNamespace

import pytest
from support import ScriptedLLM

from llama_index_graphrag_ext.core.llm.cache import LLMCache, cache_key, llm_fingerprint


@pytest.mark.parametrize("path", [None, ":memory:"])
def test_in_memory_put_get_len_clear(path):
    cache = LLMCache(path)
    assert cache.path == ":memory:"
    assert cache.get("k") is None
    cache.put("k", "v1")
    cache.put("k", "v2")  # replaces
    cache.put("j", "")
    assert cache.get("k") == "v2"
    assert cache.get("j") == ""
    assert len(cache) == 2
    assert "k" in cache and "missing" not in cache
    assert (cache.hits, cache.misses) == (2, 1)
    cache.delete("j")
    assert len(cache) == 1
    cache.clear()
    assert len(cache) == 0 and cache.hits == 0 and cache.misses == 0
    cache.close()


def test_put_rejects_non_strings():
    with LLMCache() as cache, pytest.raises(TypeError):
        cache.put("k", 3)  # type: ignore[arg-type]


def test_file_cache_persists_across_reopen_and_uses_wal(tmp_path):
    path = tmp_path / "nested" / "dir" / "llm.sqlite"
    with LLMCache(path) as cache:
        cache.put("a", "alpha")
        cache.put("b", "beta")
    assert cache.closed
    with pytest.raises(RuntimeError):
        cache.get("a")
    cache.close()  # closing twice is fine

    with LLMCache(str(path)) as reopened:
        assert reopened.get("a") == "alpha"
        assert reopened.get("b") == "beta"
        assert len(reopened) == 2

    # Written data is committed: a plain sqlite reader sees it, in WAL mode.
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("SELECT COUNT(*) FROM llm_cache").fetchone()[0] == 2
    finally:
        conn.close()


def test_writes_are_visible_before_close(tmp_path):
    path = tmp_path / "c.sqlite"
    writer = LLMCache(path)
    writer.put("k", "v")
    # A second connection (another process after a crash, say) sees the row at once.
    with LLMCache(path) as reader:
        assert reader.get("k") == "v"
    writer.close()


def test_concurrent_threads(tmp_path):
    cache = LLMCache(tmp_path / "threads.sqlite")
    errors: list[BaseException] = []

    def work(worker: int) -> None:
        try:
            for i in range(100):
                cache.put(f"{worker}-{i}", str(i))
                assert cache.get(f"{worker}-{i}") == str(i)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(cache) == 800
    assert cache.hits == 800
    cache.close()


def test_cache_key_is_canonical():
    k1 = cache_key("m", "prompt", {"temperature": 0.0, "max_tokens": 5})
    k2 = cache_key("m", "prompt", {"max_tokens": 5, "temperature": 0.0})
    assert k1 == k2
    assert len(k1) == 64 and all(c in "0123456789abcdef" for c in k1)
    assert cache_key("m", "prompt") == cache_key("m", "prompt", {})
    assert cache_key("m", "prompt") != cache_key("m2", "prompt")
    assert cache_key("m", "prompt") != cache_key("m", "prompt ")
    assert k1 != cache_key("m", "prompt", {"temperature": 0.1, "max_tokens": 5})
    # Values JSON cannot express still give a stable key.
    assert cache_key("m", "p", {"obj": object}) == cache_key("m", "p", {"obj": object})


def test_fingerprint_separates_models_and_settings():
    a = ScriptedLLM(["x"], model_name="model-a")
    a2 = ScriptedLLM(["y"], model_name="model-a")
    b = ScriptedLLM(["x"], model_name="model-b")
    assert llm_fingerprint(a) == llm_fingerprint(a2)
    assert llm_fingerprint(a) != llm_fingerprint(b)
    assert llm_fingerprint(a).startswith("ScriptedLLM:model-a:")


def test_fingerprint_reads_sampling_attributes():
    def fake(**attrs):
        return SimpleNamespace(metadata=SimpleNamespace(model_name="local"), **attrs)

    base = llm_fingerprint(fake(temperature=0.1, max_new_tokens=64, model_path="/x/a.gguf"))
    assert "a.gguf" in base and "/x/" not in base
    assert base == llm_fingerprint(fake(temperature=0.1, max_new_tokens=64, model_path="/y/a.gguf"))
    assert base != llm_fingerprint(fake(temperature=0.7, max_new_tokens=64, model_path="/x/a.gguf"))
    assert base != llm_fingerprint(fake(temperature=0.1, max_new_tokens=32, model_path="/x/a.gguf"))
    assert base != llm_fingerprint(fake(temperature=0.1, max_new_tokens=64, model_path="/x/b.gguf"))
    assert llm_fingerprint(fake(max_tokens=1)) != llm_fingerprint(fake(max_tokens=2))


def test_fingerprint_survives_broken_metadata():
    class Broken:
        @property
        def metadata(self):
            raise RuntimeError("needs a server")

    assert llm_fingerprint(Broken()).startswith("Broken::")
