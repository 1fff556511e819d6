"""Counting LLM calls and tokens: one meter, fed by LlamaIndex's instrumentation.

One event handler turns every LLM's start and end events into counts for a
:func:`capture` (the calls of one context, which :class:`.calls.LLMCaller` opens
per attempt) and for process-wide meters (:func:`count_llm_calls`, outermost
calls only). Tokens are the provider's reported usage, else counted.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events.llm import (
    LLMChatEndEvent,
    LLMChatStartEvent,
    LLMCompletionEndEvent,
    LLMCompletionStartEvent,
)
from llama_index.core.instrumentation.events.span import SpanDropEvent

from ..text.tokens import count_tokens

__all__ = [
    "Capture",
    "UsageMeter",
    "capture",
    "count_llm_calls",
    "finish_reason",
    "fresh_call_depth",
    "reported_usage",
]


class UsageMeter:
    """Thread-safe counters of LLM usage (read them as attributes).

    Attributes:
        calls: Requests sent to the LLM (every attempt, failed ones included).
        prompt_tokens: Prompt tokens, as the provider reported them (or counted).
        parse_failures: Replies that stayed unusable after every re-ask.
        truncated: Replies cut by the length limit that could not be completed.
        length_retries: Re-asks with a larger ``max_tokens`` after a cut reply.
    """

    FIELDS: ClassVar[tuple[str, ...]] = (
        "calls",
        "cache_hits",
        "prompt_tokens",
        "completion_tokens",
        "retries",
        "failures",
        "parse_failures",
        "truncated",
        "length_retries",
    )

    def __init__(self) -> None:
        self._lock = threading.Lock()
        for name in self.FIELDS:
            setattr(self, name, 0)

    def add(self, **counts: int) -> None:
        """Add to counters atomically (``meter.add(calls=1)``); unknown names raise KeyError."""
        unknown = set(counts) - set(self.FIELDS)
        if unknown:
            raise KeyError(f"unknown usage counters: {sorted(unknown)}")
        with self._lock:
            for name, amount in counts.items():
                setattr(self, name, getattr(self, name) + int(amount))

    @property
    def total_tokens(self) -> int:
        """Prompt plus completion tokens."""
        with self._lock:
            return self.prompt_tokens + self.completion_tokens

    def snapshot(self) -> dict[str, int]:
        """A consistent copy of every counter, plus ``total_tokens``."""
        with self._lock:
            data = {name: getattr(self, name) for name in self.FIELDS}
        data["total_tokens"] = data["prompt_tokens"] + data["completion_tokens"]
        return data

    def take(self) -> tuple[int, int]:
        """``(calls, total tokens)`` since the last ``take``, then every counter back to zero."""
        with self._lock:
            out = (self.calls, self.prompt_tokens + self.completion_tokens)
            for name in self.FIELDS:
                setattr(self, name, 0)
        return out

    def reset(self) -> None:
        """Every counter back to zero."""
        self.take()

    def __repr__(self) -> str:
        body = ", ".join(f"{k}={v}" for k, v in self.snapshot().items() if v)
        return f"UsageMeter({body})"


def _as_mapping(obj: Any) -> Mapping[str, Any] | None:
    if obj is None:
        return None
    if isinstance(obj, Mapping):
        return obj
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        try:
            data = dump()
        except Exception:  # a provider object that cannot dump itself
            return None
        return data if isinstance(data, Mapping) else None
    return vars(obj) if hasattr(obj, "__dict__") else None


def _first_int(usage: Mapping[str, Any], keys: tuple[str, ...]) -> int | None:
    for key in keys:
        value = usage.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return int(value)
    return None


def reported_usage(response: Any) -> tuple[int | None, int | None]:
    """``(prompt_tokens, completion_tokens)`` a response reports; ``None`` where it does not.

    Reads ``response.raw["usage"]`` (OpenAI, Anthropic and Gemini names), then
    ``additional_kwargs`` (where LlamaIndex's OpenAI puts a stream's usage).
    """
    sources: list[Mapping[str, Any]] = []
    raw = _as_mapping(getattr(response, "raw", None))
    if raw is not None:
        for name in ("usage", "usage_metadata"):
            usage = _as_mapping(raw.get(name))
            if usage:
                sources.append(usage)
    extra = _as_mapping(getattr(response, "additional_kwargs", None))
    if extra:
        sources.append(extra)
    prompt = completion = None
    for usage in sources:
        if prompt is None:
            prompt = _first_int(usage, ("prompt_tokens", "input_tokens", "prompt_token_count"))
        if completion is None:
            completion = _first_int(
                usage, ("completion_tokens", "output_tokens", "candidates_token_count")
            )
    return prompt, completion


_LENGTH_REASONS = frozenset({"length", "max_tokens", "max_output_tokens", "MAX_TOKENS"})


def finish_reason(response: Any) -> str | None:
    """Why a response ended: ``"length"`` when the output limit cut it, else the provider's word.

    Reads OpenAI-style ``raw.choices[0].finish_reason``, Anthropic-style
    ``raw.stop_reason`` and ``additional_kwargs``; ``None`` when it does not say.
    """
    raw = _as_mapping(getattr(response, "raw", None)) or {}
    reason = None
    choices = raw.get("choices")
    if isinstance(choices, (list, tuple)) and choices:
        first = _as_mapping(choices[0]) or {}
        reason = first.get("finish_reason")
    reason = reason or raw.get("stop_reason") or raw.get("finish_reason")
    if reason is None:
        extra = _as_mapping(getattr(response, "additional_kwargs", None)) or {}
        reason = extra.get("finish_reason") or extra.get("stop_reason")
    if reason is None:
        return None
    reason = str(getattr(reason, "value", reason))
    return "length" if reason in _LENGTH_REASONS else reason


def _response_text(response: Any) -> str:
    if response is None:
        return ""
    text = getattr(response, "text", None)
    if text is None and getattr(response, "message", None) is not None:
        text = response.message.content
    return "" if text is None else str(text)


def _tokens_of(prompt: str, response: Any) -> tuple[int, int]:
    prompt_tokens, completion_tokens = reported_usage(response)
    if prompt_tokens is None:
        prompt_tokens = count_tokens(prompt)
    if completion_tokens is None:
        completion_tokens = count_tokens(_response_text(response))
    return prompt_tokens, completion_tokens


@dataclass
class Capture:
    """The LLM responses seen in one context while a :func:`capture` block is open.

    Attributes:
        ended: ``(prompt text, response)`` of every call that ended, in order; an
            outer call ends after its inner ones, so the last is the outermost.
    """

    ended: list[tuple[str, Any]] = field(default_factory=list)

    @property
    def last(self) -> tuple[str, Any] | None:
        """The outermost (last) call that ended, if any."""
        return self.ended[-1] if self.ended else None

    def tokens(self, prompt: str) -> tuple[int, int]:
        """``(prompt, completion)`` tokens of the outermost call (counted when unreported)."""
        if self.last is None:
            return count_tokens(prompt), 0
        seen_prompt, response = self.last
        return _tokens_of(seen_prompt or prompt, response)


_CAPTURES: contextvars.ContextVar[tuple[Capture, ...]] = contextvars.ContextVar(
    "graphrag_llm_captures", default=()
)
# The LLM calls open in this context, outermost first, by span id.
_OPEN: contextvars.ContextVar[tuple[str | None, ...]] = contextvars.ContextVar(
    "graphrag_llm_open_calls", default=()
)
_GLOBAL: list[UsageMeter] = []
_GLOBAL_LOCK = threading.Lock()


@contextlib.contextmanager
def capture() -> Iterator[Capture]:
    """Collect the responses of the LLM calls made in this context while the block runs."""
    cap = Capture()
    token = _CAPTURES.set((*_CAPTURES.get(), cap))
    try:
        yield cap
    finally:
        _CAPTURES.reset(token)


@contextlib.contextmanager
def fresh_call_depth() -> Iterator[None]:
    """Count calls made in the block as outermost.

    A call that raises emits no end event, so each attempt of the caller starts afresh.
    """
    token = _OPEN.set(())
    try:
        yield
    finally:
        _OPEN.reset(token)


def _prompt_of(event: Any) -> str:
    if isinstance(event, LLMCompletionEndEvent):
        return str(event.prompt or "")
    return "\n".join(str(m.content or "") for m in (event.messages or []))


class _UsageEvents(BaseEventHandler):
    """Feeds captures and process-wide meters from the dispatcher's LLM events."""

    @classmethod
    def class_name(cls) -> str:
        return "GraphragUsageEvents"

    def handle(self, event: Any, **kwargs: Any) -> None:
        if isinstance(event, (LLMCompletionStartEvent, LLMChatStartEvent)):
            _OPEN.set((*_OPEN.get(), event.span_id))
            return
        if isinstance(event, SpanDropEvent):  # a call that raised: it and its inner calls
            calls = _OPEN.get()
            if event.span_id in calls:
                _OPEN.set(calls[: calls.index(event.span_id)])
            return
        if not isinstance(event, (LLMCompletionEndEvent, LLMChatEndEvent)):
            return
        calls = _OPEN.get()
        # A stream ends outside its span: then the innermost open call is the one ending.
        at = len(calls) - 1 - calls[::-1].index(event.span_id) if event.span_id in calls else None
        at = max(0, len(calls) - 1) if at is None else at
        depth = at + 1
        _OPEN.set(calls[:at])
        prompt = _prompt_of(event)
        for cap in _CAPTURES.get():
            cap.ended.append((prompt, event.response))
        if depth > 1 or not _GLOBAL:
            return
        prompt_tokens, completion_tokens = _tokens_of(prompt, event.response)
        with _GLOBAL_LOCK:
            meters = list(_GLOBAL)
        for meter in meters:
            meter.add(calls=1, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)


_HANDLER = _UsageEvents()
get_dispatcher().add_event_handler(_HANDLER)


@contextlib.contextmanager
def count_llm_calls() -> Iterator[UsageMeter]:
    """Count every outermost LLM call answered in this process while the block runs.

    ``calls`` counts answered calls (a call that raised emits no end event).
    """
    meter = UsageMeter()
    with _GLOBAL_LOCK:
        _GLOBAL.append(meter)
    try:
        yield meter
    finally:
        with _GLOBAL_LOCK:
            _GLOBAL.remove(meter)
