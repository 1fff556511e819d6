"""A deterministic, scripted LLM for testing pipelines offline.

``ScriptedLLM`` is a real
LlamaIndex ``CustomLLM``: callbacks (``TokenCountingHandler``), instrumentation
and every component that accepts ``llm=`` treat it like any other model. It
answers from a script instead of a network, so tests are fast and repeatable.

Example:
    >>> llm = ScriptedLLM({"capital of France": "Paris"}, default="I don't know")
    >>> llm.complete("What is the capital of France?").text
    'Paris'
    >>> llm.complete("What is 2 + 2?").text
    "I don't know"
    >>> llm.call_count
    2
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import logging
import re
import threading
import time
from collections.abc import AsyncGenerator, Callable, Generator, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.base.llms.types import (
    CompletionResponse,
    CompletionResponseAsyncGen,
    CompletionResponseGen,
    LLMMetadata,
)
from llama_index.core.callbacks import CallbackManager
from llama_index.core.llms import CustomLLM
from llama_index.core.llms.callbacks import llm_completion_callback
from pydantic import Field, PrivateAttr

from llama_index_graphrag_ext.core.llm import run_sync

logger = logging.getLogger(__name__)

__all__ = ["BagOfWordsEmbedding", "Delay", "ScriptExhaustedError", "ScriptedLLM"]


class ScriptExhaustedError(AssertionError):
    """The script has no answer for a prompt (list used up, or no key matched)."""


@dataclass(frozen=True)
class Delay:
    """A scripted answer that arrives late.

    The sync path waits with ``time.sleep``, the async path with
    ``asyncio.sleep`` (so ``asyncio.wait_for`` timeouts can cancel it).

    Attributes:
        seconds: How long to wait.
        response: What to answer afterwards (text, an exception, or a callable).
    """

    seconds: float
    response: Any = ""


class _NoDefault:
    def __repr__(self) -> str:
        return "<no default>"


_NO_DEFAULT: Any = _NoDefault()


def _is_exception(item: Any) -> bool:
    return isinstance(item, BaseException) or (
        isinstance(item, type) and issubclass(item, BaseException)
    )


def _word_count(text: str) -> int:
    return len(text.split())


def _stream_pieces(text: str) -> list[str]:
    """Split text into word-sized deltas whose concatenation is exactly ``text``."""
    pieces = re.findall(r"\s*\S+", text)
    if not pieces:
        return [text]
    tail = text[sum(len(p) for p in pieces) :]
    pieces[-1] += tail
    return pieces


class ScriptedLLM(CustomLLM):
    """An LLM that answers from a script.

    Args:
        responses: The script, one of:

            - a sequence of answers used in order, one per call;
            - a mapping from a prompt substring (``str``) or a compiled regular
              expression to an answer; the first key found in the prompt, in
              insertion order, wins. A list value gives successive answers for
              that key;
            - a callable ``prompt -> answer`` (it may be ``async``);
            - a single string, returned for every prompt.

            An answer may be a string, an exception instance or class (raised
            instead of answering), a ``Delay``,
            or a callable ``prompt -> answer``.
        default: The answer when the script has none; without it a
            ``ScriptExhaustedError``
            is raised.
        model_name: Reported in ``metadata.model_name`` (and so in cache keys).
        callback_manager: Callbacks to notify, e.g. one holding a
            ``TokenCountingHandler``.
        **kwargs: Other ``CustomLLM`` fields.

    Every answer reports ``raw={"usage": {...}}`` with prompt and completion
    token counts equal to their whitespace-separated word counts, so token
    accounting is exact and deterministic.
    """

    model_name: str = Field(default="scripted", description="Model name reported in metadata.")
    context_window: int = Field(default=8192, gt=0, description="Reported context window.")
    num_output: int = Field(default=512, gt=0, description="Reported maximum output tokens.")

    _mode: str = PrivateAttr(default="list")
    _items: list[Any] = PrivateAttr(default_factory=list)
    _rules: list[tuple[Any, Any]] = PrivateAttr(default_factory=list)
    _rule_cursors: dict[int, int] = PrivateAttr(default_factory=dict)
    _fn: Callable[[str], Any] | None = PrivateAttr(default=None)
    _default: Any = PrivateAttr(default=_NO_DEFAULT)
    _cursor: int = PrivateAttr(default=0)
    _calls: list[str] = PrivateAttr(default_factory=list)
    _lock: Any = PrivateAttr(default_factory=threading.Lock)

    def __init__(
        self,
        responses: Iterable[Any] | Mapping[Any, Any] | Callable[[str], Any] | str = (),
        *,
        default: Any = _NO_DEFAULT,
        model_name: str = "scripted",
        callback_manager: CallbackManager | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            model_name=model_name,
            callback_manager=callback_manager or CallbackManager([]),
            **kwargs,
        )
        self._default = default
        if isinstance(responses, str):
            self._mode = "constant"
            self._default = responses
        elif isinstance(responses, Mapping):
            self._mode = "dict"
            for key, value in responses.items():
                if not isinstance(key, (str, re.Pattern)):
                    raise TypeError(
                        f"ScriptedLLM dict keys must be str or re.Pattern, got {type(key).__name__}"
                    )
                if isinstance(value, (list, tuple)):
                    value = list(value)
                self._rules.append((key, value))
        elif callable(responses) and not _is_exception(responses):
            self._mode = "callable"
            self._fn = responses
        else:
            self._mode = "list"
            self._items = list(responses)

    @classmethod
    def class_name(cls) -> str:
        return "ScriptedLLM"

    @property
    def metadata(self) -> LLMMetadata:
        """Reported capabilities: ``model_name``, ``context_window``, ``num_output``."""
        return LLMMetadata(
            context_window=self.context_window,
            num_output=self.num_output,
            model_name=self.model_name,
            is_chat_model=False,
        )

    # ----------------------------------------------------------------- records

    @property
    def calls(self) -> list[str]:
        """The prompts received so far, in order (a copy)."""
        with self._lock:
            return list(self._calls)

    @property
    def call_count(self) -> int:
        """How many completions were requested."""
        with self._lock:
            return len(self._calls)

    @property
    def remaining(self) -> int | None:
        """Unused answers of a sequence script; ``None`` for other script kinds."""
        with self._lock:
            return len(self._items) - self._cursor if self._mode == "list" else None

    def reset_calls(self) -> None:
        """Forget the recorded prompts (the script position is kept)."""
        with self._lock:
            self._calls.clear()

    # ----------------------------------------------------------------- script

    def _next_item(self, prompt: str) -> Any:
        """Record the call and pick the scripted item for it."""
        with self._lock:
            self._calls.append(prompt)
            number = len(self._calls)
            if self._mode == "callable":
                return self._fn
            if self._mode == "list":
                if self._cursor < len(self._items):
                    self._cursor += 1
                    return self._items[self._cursor - 1]
                if self._default is not _NO_DEFAULT:
                    return self._default
                raise ScriptExhaustedError(
                    f"ScriptedLLM script used up: call {number} got no answer "
                    f"(the script has {len(self._items)}); prompt: {prompt[:200]!r}"
                )
            for index, (key, value) in enumerate(self._rules):
                hit = key.search(prompt) if isinstance(key, re.Pattern) else key in prompt
                if not hit:
                    continue
                if isinstance(value, list):
                    cursor = self._rule_cursors.get(index, 0)
                    if cursor >= len(value):
                        if self._default is not _NO_DEFAULT:
                            return self._default
                        raise ScriptExhaustedError(
                            f"ScriptedLLM answers for key {key!r} used up after {len(value)}; "
                            f"prompt: {prompt[:200]!r}"
                        )
                    self._rule_cursors[index] = cursor + 1
                    return value[cursor]
                return value
            if self._default is not _NO_DEFAULT:
                return self._default
            raise ScriptExhaustedError(
                f"ScriptedLLM has no answer for this prompt (no key matched): {prompt[:200]!r}"
            )

    def _resolve_sync(self, item: Any, prompt: str) -> str:
        while True:
            if _is_exception(item):
                raise item
            if isinstance(item, Delay):
                time.sleep(item.seconds)
                item = item.response
                continue
            if inspect.isawaitable(item):
                awaitable = item
                item = run_sync(lambda awaitable=awaitable: _await(awaitable))
                continue
            if callable(item):
                item = item(prompt)
                continue
            return "" if item is None else str(item)

    async def _resolve_async(self, item: Any, prompt: str) -> str:
        while True:
            if _is_exception(item):
                raise item
            if isinstance(item, Delay):
                await asyncio.sleep(item.seconds)
                item = item.response
                continue
            if inspect.isawaitable(item):
                item = await item
                continue
            if callable(item):
                item = item(prompt)
                continue
            return "" if item is None else str(item)

    @staticmethod
    def _usage(prompt: str, text: str) -> dict[str, Any]:
        prompt_tokens = _word_count(prompt)
        completion_tokens = _word_count(text)
        return {
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            }
        }

    def _response(self, prompt: str, text: str) -> CompletionResponse:
        return CompletionResponse(text=text, raw=self._usage(prompt, text))

    def _stream_responses(self, prompt: str, text: str) -> list[CompletionResponse]:
        responses = []
        so_far = ""
        for delta in _stream_pieces(text):
            so_far += delta
            responses.append(
                CompletionResponse(text=so_far, delta=delta, raw=self._usage(prompt, so_far))
            )
        return responses

    # ----------------------------------------------------------------- LLM API

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        """Answer ``prompt`` from the script (waiting with ``time.sleep`` for a ``Delay``)."""
        text = self._resolve_sync(self._next_item(prompt), prompt)
        return self._response(prompt, text)

    @llm_completion_callback()
    async def acomplete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponse:
        """Answer ``prompt`` from the script without blocking the event loop."""
        text = await self._resolve_async(self._next_item(prompt), prompt)
        return self._response(prompt, text)

    @llm_completion_callback()
    def stream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseGen:
        """Stream the scripted answer word by word (whitespace kept in the deltas)."""
        text = self._resolve_sync(self._next_item(prompt), prompt)
        chunks = self._stream_responses(prompt, text)

        def gen() -> Generator[CompletionResponse, None, None]:
            yield from chunks

        return gen()

    @llm_completion_callback()
    async def astream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseAsyncGen:
        """Async version of ``stream_complete``."""
        text = await self._resolve_async(self._next_item(prompt), prompt)
        chunks = self._stream_responses(prompt, text)

        async def gen() -> AsyncGenerator[CompletionResponse, None]:
            for chunk in chunks:
                yield chunk
                await asyncio.sleep(0)

        return gen()


async def _await(awaitable: Any) -> Any:
    return await awaitable


class BagOfWordsEmbedding(BaseEmbedding):
    """Deterministic hashed bag-of-words vectors: texts that share words are similar.

    A fast, dependency-free embedder for tests of index and retriever plumbing
    (the real MiniLM is for the tests of retrieval quality). Each lower-cased word
    adds one to the slot :meth:`_slot` gives it (md5, stable across processes);
    subclasses may hash differently. A text without words gets the first axis.

    Args:
        dim: Vector dimension.
    """

    dim: int = 64

    @classmethod
    def class_name(cls) -> str:
        return "BagOfWordsEmbedding"

    def _slot(self, word: str) -> int:
        return int(hashlib.md5(word.encode("utf-8", "surrogatepass")).hexdigest(), 16) % self.dim

    def _vector(self, text: str) -> list[float]:
        vec = np.zeros(self.dim, dtype=np.float32)
        for word in re.findall(r"\w+", text.lower()):
            vec[self._slot(word)] += 1.0
        if not vec.any():
            vec[0] = 1.0
        return (vec / np.linalg.norm(vec)).tolist()

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._vector(text)
