"""Counting every LLM call a piece of work makes, wherever it is made.

The runner and the demo need the LLM calls and tokens of one method's indexing
and querying. Attaching a ``TokenCountingHandler`` to one LLM's callback
manager misses calls once a synthesizer or engine swaps that manager (LlamaIndex
components do), so this counts through LlamaIndex's instrumentation dispatcher
instead: every ``LLM`` emits start and end events there, whoever calls it.

A chat call that an LLM implements through its own completion (llama.cpp,
``CustomLLM``) emits nested events; only the outermost call is counted.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Iterator
from typing import Any

from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events.llm import (
    LLMChatEndEvent,
    LLMChatStartEvent,
    LLMCompletionEndEvent,
    LLMCompletionStartEvent,
)
from pydantic import PrivateAttr

from .llm import estimate_tokens, reported_usage

# Depth of nested LLM calls in the current thread or task (outermost = 1).
_DEPTH: contextvars.ContextVar[int] = contextvars.ContextVar("graphrag_llm_depth", default=0)


class LLMCallCounter(BaseEventHandler):
    """Counts outermost LLM calls and their prompt and completion tokens.

    Tokens come from the provider's reported usage when the response has it,
    else from the tiktoken estimate of the prompt and completion texts.
    """

    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _calls: int = PrivateAttr(default=0)
    _prompt_tokens: int = PrivateAttr(default=0)
    _completion_tokens: int = PrivateAttr(default=0)

    @classmethod
    def class_name(cls) -> str:
        return "LLMCallCounter"

    def handle(self, event: Any, **kwargs: Any) -> None:
        if isinstance(event, (LLMCompletionStartEvent, LLMChatStartEvent)):
            _DEPTH.set(_DEPTH.get() + 1)
            return
        if not isinstance(event, (LLMCompletionEndEvent, LLMChatEndEvent)):
            return
        depth = _DEPTH.get()
        _DEPTH.set(max(0, depth - 1))
        if depth > 1:
            return  # an inner call of one we count at its end
        if isinstance(event, LLMCompletionEndEvent):
            prompt_text, response = event.prompt, event.response
        else:
            prompt_text = "\n".join(str(m.content or "") for m in event.messages)
            response = event.response
        text = "" if response is None else (getattr(response, "text", None) or str(response))
        prompt_tokens, completion_tokens = (None, None)
        if response is not None:
            prompt_tokens, completion_tokens = reported_usage(response)
        with self._lock:
            self._calls += 1
            self._prompt_tokens += prompt_tokens if prompt_tokens else estimate_tokens(prompt_text)
            self._completion_tokens += (
                completion_tokens if completion_tokens else estimate_tokens(text)
            )

    @property
    def calls(self) -> int:
        """LLM calls counted so far."""
        return self._calls

    @property
    def prompt_tokens(self) -> int:
        """Prompt tokens counted so far."""
        return self._prompt_tokens

    @property
    def completion_tokens(self) -> int:
        """Completion tokens counted so far."""
        return self._completion_tokens

    @property
    def total_tokens(self) -> int:
        """Prompt plus completion tokens."""
        return self._prompt_tokens + self._completion_tokens

    def take(self) -> tuple[int, int]:
        """``(calls, total tokens)`` since the last ``take``; then reset."""
        with self._lock:
            out = (self._calls, self._prompt_tokens + self._completion_tokens)
            self._calls = self._prompt_tokens = self._completion_tokens = 0
        return out


@contextlib.contextmanager
def count_llm_calls() -> Iterator[LLMCallCounter]:
    """Count every LLM call made in this process while the block runs."""
    dispatcher = get_dispatcher()
    counter = LLMCallCounter()
    dispatcher.add_event_handler(counter)
    try:
        yield counter
    finally:
        with contextlib.suppress(ValueError):
            dispatcher.event_handlers.remove(counter)
