"""The copy of an LLM the suite calls, and what kind of LLM it is.

See :func:`call_copy`: one retry layer (the suite's), a per-call ``max_tokens``
within the user's own ceiling, usage at the end of streams, and a client of its
own bound to the suite's event loop. LLMs that compute inside their async
methods (llama.cpp) are called in a worker thread, one call at a time.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass
from typing import Any

from llama_index.core.llms import CustomLLM

from .parse import LLMOutputError
from .retry import RetryPolicy

#: How many times a reply cut by the length limit is asked again with twice the limit.
LENGTH_RETRIES = 2

__all__ = [
    "LENGTH_RETRIES",
    "LLMRequestError",
    "LLMStreamError",
    "LLMTruncatedError",
    "Reply",
    "call_copy",
    "is_blocking",
    "lock_of",
    "output_ceiling",
]


class LLMTruncatedError(LLMOutputError):
    """A reply stopped by the length limit that could not be completed."""


class LLMRequestError(RuntimeError):
    """A request the server refused for what it is, which no retry or other mode can fix.

    Attributes:
        kind: ``model not found``, ``not authorised`` or ``context overflow``.
    """

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.kind, str(self).split(": ", 1)[-1]))


class LLMStreamError(ConnectionError):
    """A stream that broke after part of its answer was shown (it cannot be asked again
    without showing that part twice)."""


@dataclass(frozen=True)
class Reply:
    """One completed reply.

    Attributes:
        text: The reply without reasoning blocks.
        raw: The reply as the model wrote it.
        finish_reason: Why it ended (``None`` when the provider does not say).
    """

    text: str
    raw: str
    finish_reason: str | None = None
    from_cache: bool = False


def call_copy(llm: Any, policy: RetryPolicy) -> Any:
    """The copy of ``llm`` the suite calls: one retry layer, and a client of its own.

    The client's own retries are turned off and its time-out follows the policy;
    an instance-wide ``max_tokens`` gives way to each call's; OpenAI-style
    clients report usage at the end of streams. The copy opens its own
    connections on the suite's loop rather than sharing the user's pooled client.
    """
    fields = getattr(type(llm), "model_fields", {})
    update: dict[str, Any] = {}
    if "max_retries" in fields and getattr(llm, "max_retries", 0):
        update["max_retries"] = 0
    if "timeout" in fields and policy.timeout is not None:
        update["timeout"] = float(policy.timeout)
    if "max_tokens" in fields and getattr(llm, "max_tokens", None) is not None:
        update["max_tokens"] = None
    if "additional_kwargs" in fields and hasattr(llm, "_get_aclient"):
        extra = dict(getattr(llm, "additional_kwargs", None) or {})
        extra.setdefault("stream_options", {"include_usage": True})
        update["additional_kwargs"] = extra
    if not update:
        return llm
    copy = llm.model_copy(update=update)
    for private in ("_client", "_aclient"):
        if private in (getattr(copy, "__pydantic_private__", None) or {}):
            setattr(copy, private, None)
    return copy


def output_ceiling(llm: Any) -> int | None:
    """The output limit the user set on the LLM itself (OpenAI's ``max_tokens``, llama.cpp's
    ``max_new_tokens``): per-call limits never go beyond it."""
    for attr in ("max_tokens", "max_new_tokens"):
        value = getattr(llm, attr, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def is_blocking(llm: Any) -> bool:
    """An LLM whose async methods compute in the calling thread (llama.cpp and other CustomLLMs)."""
    return isinstance(llm, CustomLLM) and type(llm).acomplete is CustomLLM.acomplete


# One lock per blocking LLM object: llama.cpp's model is not thread-safe.
_BLOCKING_LOCKS: weakref.WeakKeyDictionary[Any, threading.Lock] = weakref.WeakKeyDictionary()
_LOCKS_GUARD = threading.Lock()


def lock_of(llm: Any) -> threading.Lock:
    with _LOCKS_GUARD:
        lock = _BLOCKING_LOCKS.get(llm)
        if lock is None:
            lock = _BLOCKING_LOCKS[llm] = threading.Lock()
        return lock
