"""Persistent LLM response cache, keyed by model, prompt and call parameters.

Each response is stored as soon as it arrives, so a run that crashes half-way
resumes without paying twice and a re-run makes no LLM calls.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

__all__ = ["LLMCache", "cache_key", "llm_fingerprint"]

_MEMORY = ":memory:"

# Attributes of a LlamaIndex LLM that change what it answers (read with getattr).
_SAMPLING_ATTRS = (
    "model",
    "temperature",
    "top_p",
    "top_k",
    "max_tokens",
    "max_new_tokens",
    "seed",
    "system_prompt",
)


class LLMCache:
    """A sqlite-backed key-value store for LLM responses.

    Every ``put`` is committed at once; file databases use WAL, so several
    processes may read while one writes. One connection is shared by all threads
    behind a lock.

    Args:
        path: A file path (parent folders are created), or ``None`` /
            ``":memory:"`` for an in-memory cache.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        if path is None or str(path) == _MEMORY:
            self.path = _MEMORY
        else:
            file_path = Path(path).expanduser()
            file_path.parent.mkdir(parents=True, exist_ok=True)
            self.path = str(file_path)
        self.hits = 0
        self.misses = 0
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = sqlite3.connect(
            self.path, check_same_thread=False, timeout=30.0, isolation_level=None
        )
        with self._lock:
            if self.path != _MEMORY:
                self._conn.execute("PRAGMA journal_mode=WAL")
                self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS llm_cache ("
                "key TEXT PRIMARY KEY, value TEXT NOT NULL, created REAL NOT NULL)"
            )
        logger.debug("opened LLM cache at %s", self.path)

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise RuntimeError(f"LLMCache at {self.path} is closed")
        return self._conn

    def get(self, key: str) -> str | None:
        """Return the cached value for ``key``, or ``None`` when absent."""
        with self._lock:
            row = (
                self._connection()
                .execute("SELECT value FROM llm_cache WHERE key = ?", (key,))
                .fetchone()
            )
            if row is None:
                self.misses += 1
                return None
            self.hits += 1
            return row[0]

    def put(self, key: str, value: str) -> None:
        """Store ``value`` under ``key``, replacing any earlier value; committed on return.

        Raises:
            TypeError: If ``value`` is not a string.
        """
        if not isinstance(value, str):
            raise TypeError(f"LLMCache stores str values, got {type(value).__name__}")
        with self._lock:
            self._connection().execute(
                "INSERT OR REPLACE INTO llm_cache (key, value, created) VALUES (?, ?, ?)",
                (key, value, time.time()),
            )

    def delete(self, key: str) -> None:
        """Remove ``key`` if present."""
        with self._lock:
            self._connection().execute("DELETE FROM llm_cache WHERE key = ?", (key,))

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        with self._lock:
            row = (
                self._connection()
                .execute("SELECT 1 FROM llm_cache WHERE key = ?", (key,))
                .fetchone()
            )
        return row is not None

    def __len__(self) -> int:
        with self._lock:
            (count,) = self._connection().execute("SELECT COUNT(*) FROM llm_cache").fetchone()
        return int(count)

    def clear(self) -> None:
        """Delete every entry and reset the hit and miss counters."""
        with self._lock:
            self._connection().execute("DELETE FROM llm_cache")
            self.hits = 0
            self.misses = 0

    def close(self) -> None:
        """Close the database. Further use raises ``RuntimeError``; closing twice is fine."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    @property
    def closed(self) -> bool:
        """Whether ``close`` has been called."""
        return self._conn is None

    def __enter__(self) -> LLMCache:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"LLMCache(path={self.path!r}, {state}, hits={self.hits}, misses={self.misses})"


def _canonical_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=repr)


def cache_key(model_id: str, prompt: str, params: dict[str, Any] | None = None) -> str:
    """Build a cache key from a model id, a prompt and call parameters.

    The key is the SHA-256 hex digest of a canonical JSON document, so parameter
    order does not matter; ``model_id`` usually comes from
    [`llm_fingerprint`][llama_index_graphrag_ext.core.llm.cache.llm_fingerprint].
    """
    doc = {"model": model_id, "prompt": prompt, "params": params or {}}
    return hashlib.sha256(_canonical_json(doc).encode("utf-8")).hexdigest()


def _plain(value: Any) -> Any:
    """Return ``value`` if it is a JSON scalar, else its ``repr``."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)


def llm_fingerprint(llm: Any) -> str:
    """Return a stable identity string for a LlamaIndex LLM.

    The class name, model name, sampling settings and the file name of a local
    ``model_path``: two LLMs that could answer differently never share cache
    entries. Credentials and endpoints are not included.
    """
    name = type(llm).__name__
    try:
        model_name = str(llm.metadata.model_name)
    except Exception:  # an LLM whose metadata needs a live connection
        model_name = ""
    params: dict[str, Any] = {}
    for attr in _SAMPLING_ATTRS:
        try:
            value = getattr(llm, attr)
        except Exception:
            continue
        if callable(value) or (attr == "model" and value == model_name):
            continue
        if attr == "system_prompt" and isinstance(value, str):
            value = hashlib.sha256(value.encode("utf-8")).hexdigest()[:16]
        params[attr] = _plain(value)
    model_path = getattr(llm, "model_path", None)
    if isinstance(model_path, (str, os.PathLike)) and str(model_path):
        params["model_path"] = os.path.basename(os.fspath(model_path))
    return f"{name}:{model_name}:{_canonical_json(params)}"
