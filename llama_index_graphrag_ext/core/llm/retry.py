"""Which LLM errors are worth another attempt, and how long to wait (on ``tenacity``).

Rate limits (honouring ``Retry-After``), server errors, time-outs and broken
connections are retried; requests refused for what they are (400, 401, 403,
404, 422) fail at once. This is the one retry layer: the copy of the LLM the
suite calls has its client's own retries turned off (:func:`.calls.call_copy`).
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import random
import re
import time
from dataclasses import dataclass

from tenacity import RetryCallState

logger = logging.getLogger(__name__)

__all__ = [
    "RetryPolicy",
    "is_retryable",
    "refusal_of",
    "rejects_structured_output",
    "retry_after_seconds",
    "status_of",
]

#: HTTP statuses worth another attempt: time-out, conflict, rate limit, server errors.
RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})

# Exception class names (from openai, httpx, httpcore, aiohttp, requests) that
# mean the request never got an answer: a time-out or a broken connection.
_TRANSIENT_NAMES = frozenset(
    {
        "APITimeoutError",
        "APIConnectionError",
        "TimeoutException",
        "ConnectTimeout",
        "ReadTimeout",
        "WriteTimeout",
        "PoolTimeout",
        "ConnectError",
        "ReadError",
        "WriteError",
        "NetworkError",
        "RemoteProtocolError",
        "ServerDisconnectedError",
        "ClientConnectionError",
        "ConnectionError",
    }
)


def status_of(exc: BaseException) -> int | None:
    """The HTTP status an LLM client error carries, if any."""
    for holder in (exc, getattr(exc, "response", None)):
        status = getattr(holder, "status_code", None) or getattr(holder, "status", None)
        if isinstance(status, int):
            return status
    return None


def is_retryable(exc: BaseException) -> bool:
    """Whether another attempt can help (see the module docs)."""
    if isinstance(exc, (asyncio.CancelledError, KeyboardInterrupt, SystemExit)):
        return False
    status = status_of(exc)
    if status is not None:
        return status in RETRY_STATUSES or status >= 500
    if isinstance(exc, (TimeoutError, asyncio.TimeoutError, ConnectionError)):
        return True
    return any(cls.__name__ in _TRANSIENT_NAMES for cls in type(exc).__mro__)


_OVERFLOW = re.compile(
    r"context[_ ]length|context window|maximum context|too many tokens|prompt is too long"
    r"|input (?:is )?too long|exceeds? the (?:model'?s? )?(?:maximum|max)",
    re.IGNORECASE,
)
_STRUCTURED = re.compile(
    r"\btools?\b|tool_choice|function|response_format|json_schema|json mode|structured output",
    re.IGNORECASE,
)


def refusal_of(exc: BaseException) -> str | None:
    """What a refused request means, for the errors no retry or other mode can fix.

    ``model not found`` (404), ``not authorised`` (401, 403) and ``context
    overflow`` (a 400 or 413 about the prompt's length); ``None`` otherwise.
    """
    status = status_of(exc)
    if status == 404:
        return "model not found"
    if status in (401, 403):
        return "not authorised"
    if status in (400, 413, 422) and _OVERFLOW.search(str(exc)):
        return "context overflow"
    return None


def rejects_structured_output(exc: BaseException) -> bool:
    """A 400/422 that names tools, functions or the response format: the server cannot do
    native structured output (a 404, 401 or context overflow is not that)."""
    return (
        status_of(exc) in (400, 422)
        and refusal_of(exc) is None
        and bool(_STRUCTURED.search(str(exc)))
    )


def retry_after_seconds(exc: BaseException) -> float | None:
    """Seconds the server asked to wait (``Retry-After``: seconds or an HTTP date)."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if not headers:
        return None
    value = headers.get("retry-after-ms")
    if value is not None:
        try:
            return max(0.0, float(value) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


@dataclass(frozen=True)
class RetryPolicy:
    """How one LLM call is attempted.

    The wait is the server's ``Retry-After`` (capped at ``max_retry_after``),
    else ``base_delay * 2 ** (attempt - 1)`` capped at ``max_delay``, jittered
    between half and all of it so concurrent callers do not retry in lockstep.

    Attributes:
        max_attempts: Attempts per call, the first included (>= 1).
        timeout: Seconds allowed per attempt (``None``: no limit), also the HTTP
            client's own time-out.
    """

    max_attempts: int = 3
    timeout: float | None = 60.0
    base_delay: float = 0.5
    max_delay: float = 8.0
    max_retry_after: float = 60.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, got {self.max_attempts}")
        if self.timeout is not None and self.timeout <= 0:
            raise ValueError(f"timeout must be > 0 or None, got {self.timeout}")
        if min(self.base_delay, self.max_delay, self.max_retry_after) < 0:
            raise ValueError("delays must be >= 0")

    def backoff(self, attempt: int) -> float:
        """The jittered exponential wait after failed attempt number ``attempt`` (1-based)."""
        delay = min(self.max_delay, self.base_delay * (2 ** max(0, attempt - 1)))
        return delay / 2 + random.uniform(0, delay / 2) if delay > 0 else 0.0

    def wait(self, state: RetryCallState) -> float:
        """tenacity ``wait=``: the server's ``Retry-After``, else the back-off."""
        exc = state.outcome.exception() if state.outcome is not None else None
        asked = retry_after_seconds(exc) if exc is not None else None
        if asked is not None:
            return min(asked, self.max_retry_after)
        return self.backoff(state.attempt_number)

    @staticmethod
    def retryable(exc: BaseException) -> bool:
        """tenacity ``retry=`` predicate (see :func:`is_retryable`)."""
        return is_retryable(exc)

    def describe(self, exc: BaseException) -> str:
        """A short account of an error for the logs."""
        if isinstance(exc, (TimeoutError, asyncio.TimeoutError)) and not str(exc):
            return f"no answer within {self.timeout}s"
        status = status_of(exc)
        text = " ".join(str(exc).split())
        text = text if len(text) <= 200 else text[:197] + "..."
        return f"HTTP {status}: {text}" if status is not None and str(status) not in text else text
