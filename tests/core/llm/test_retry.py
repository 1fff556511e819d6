"""Which LLM errors are retried, and how long the caller waits: on real ``openai`` errors."""

from __future__ import annotations

import asyncio
import email.utils
import sys
from datetime import datetime, timedelta, timezone

import httpx
import openai
import pytest
from tenacity import RetryCallState

from llama_index_graphrag_ext.core.llm.retry import (
    RetryPolicy,
    is_retryable,
    retry_after_seconds,
    status_of,
)

URL = "https://api.example.com/v1/chat/completions"


def _request() -> httpx.Request:
    return httpx.Request("POST", URL)


def api_error(cls: type[openai.APIStatusError], status: int, **headers: str):
    """A real openai status error with a real httpx response, as the SDK raises it."""
    body = {"error": {"message": f"error {status}", "type": "x", "code": None}}
    response = httpx.Response(status, request=_request(), headers=headers, json=body)
    return cls(f"Error code: {status}", response=response, body=body["error"])


class StatusError(Exception):
    """An error of another client that carries its HTTP status (``status_code``)."""

    def __init__(self, status_code: int, message: str = "") -> None:
        super().__init__(message)
        self.status_code = status_code


class AiohttpStyle(Exception):
    status = 503


@pytest.mark.parametrize(
    ("exc", "status", "retryable"),
    [
        (api_error(openai.RateLimitError, 429), 429, True),
        (api_error(openai.InternalServerError, 500), 500, True),
        (api_error(openai.InternalServerError, 503), 503, True),
        (api_error(openai.InternalServerError, 529), 529, True),  # any 5xx
        (api_error(openai.APIStatusError, 408), 408, True),
        (api_error(openai.ConflictError, 409), 409, True),
        (api_error(openai.AuthenticationError, 401), 401, False),
        (api_error(openai.BadRequestError, 400), 400, False),
        (api_error(openai.PermissionDeniedError, 403), 403, False),
        (api_error(openai.NotFoundError, 404), 404, False),
        (api_error(openai.UnprocessableEntityError, 422), 422, False),
        (openai.APITimeoutError(request=_request()), None, True),
        (openai.APIConnectionError(request=_request()), None, True),
        (httpx.ReadTimeout("slow", request=_request()), None, True),
        (httpx.ConnectError("refused", request=_request()), None, True),
        (httpx.RemoteProtocolError("server hung up", request=_request()), None, True),
        (TimeoutError(), None, True),
        (asyncio.TimeoutError(), None, True),
        (ConnectionError("reset"), None, True),
        (ConnectionResetError(), None, True),
        (StatusError(503), 503, True),
        (StatusError(401), 401, False),
        (AiohttpStyle(), 503, True),
        (ValueError("bad prompt"), None, False),
        (KeyError("x"), None, False),
        (RuntimeError("boom"), None, False),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, BaseException) else str(v),
)
def test_status_and_retryable(exc, status, retryable):
    assert status_of(exc) == status
    assert is_retryable(exc) is retryable
    assert RetryPolicy.retryable(exc) is retryable


@pytest.mark.parametrize(
    "exc", [asyncio.CancelledError(), KeyboardInterrupt(), SystemExit(1)], ids=type
)
def test_cancellation_and_exit_are_never_retried(exc):
    assert not is_retryable(exc)


def test_status_read_from_the_response_when_the_error_lacks_it():
    class Wrapped(Exception):
        def __init__(self, response):
            self.response = response

    response = httpx.Response(502, request=_request())
    assert status_of(Wrapped(response)) == 502 and is_retryable(Wrapped(response))


# --------------------------------------------------------------------------- Retry-After


def test_retry_after_in_seconds():
    assert retry_after_seconds(api_error(openai.RateLimitError, 429, **{"retry-after": "2"})) == 2
    exc = api_error(openai.RateLimitError, 429, **{"Retry-After": "0.2"})
    assert retry_after_seconds(exc) == pytest.approx(0.2)


def test_retry_after_ms_wins_over_seconds():
    exc = api_error(openai.RateLimitError, 429, **{"retry-after-ms": "1500", "retry-after": "9"})
    assert retry_after_seconds(exc) == pytest.approx(1.5)


def test_retry_after_as_an_http_date():
    when = datetime.now(timezone.utc) + timedelta(seconds=30)
    exc = api_error(
        openai.RateLimitError,
        429,
        **{"retry-after": email.utils.format_datetime(when, usegmt=True)},
    )
    assert 28.0 <= retry_after_seconds(exc) <= 30.5
    past = email.utils.format_datetime(datetime.now(timezone.utc) - timedelta(hours=1), usegmt=True)
    assert (
        retry_after_seconds(api_error(openai.RateLimitError, 429, **{"retry-after": past})) == 0.0
    )


@pytest.mark.parametrize(
    "exc",
    [
        api_error(openai.RateLimitError, 429),  # no header
        api_error(openai.RateLimitError, 429, **{"retry-after": "soon"}),
        openai.APITimeoutError(request=_request()),  # no response at all
        TimeoutError(),
    ],
)
def test_no_usable_retry_after(exc):
    assert retry_after_seconds(exc) is None


def test_negative_retry_after_is_zero():
    assert (
        retry_after_seconds(api_error(openai.RateLimitError, 429, **{"retry-after": "-3"})) == 0.0
    )


# --------------------------------------------------------------------------- RetryPolicy


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_attempts": 0},
        {"timeout": 0},
        {"timeout": -1.0},
        {"base_delay": -0.1},
        {"max_delay": -1},
        {"max_retry_after": -1},
    ],
)
def test_policy_rejects_invalid_settings(kwargs):
    with pytest.raises(ValueError):
        RetryPolicy(**kwargs)


def test_policy_defaults_and_settings():
    policy = RetryPolicy()
    assert policy.max_attempts >= 1 and policy.timeout and policy.timeout > 0
    assert RetryPolicy(timeout=None).timeout is None


def test_backoff_is_exponential_capped_and_jittered():
    policy = RetryPolicy(base_delay=0.5, max_delay=2.0)
    for attempt, full in [(1, 0.5), (2, 1.0), (3, 2.0), (4, 2.0), (20, 2.0)]:
        waits = {policy.backoff(attempt) for _ in range(50)}
        assert all(full / 2 <= w <= full for w in waits)
        assert len(waits) > 1  # jitter: concurrent callers do not retry in lockstep
    assert RetryPolicy(base_delay=0.0).backoff(3) == 0.0


def _state(exc: BaseException | None, attempt: int = 1) -> RetryCallState:
    state = RetryCallState(retry_object=None, fn=None, args=(), kwargs={})
    state.attempt_number = attempt
    if exc is not None:
        try:
            raise exc
        except type(exc):
            state.set_exception(sys.exc_info())
    return state


def test_wait_honours_retry_after_capped():
    policy = RetryPolicy(base_delay=10.0, max_delay=10.0, max_retry_after=5.0)
    assert policy.wait(_state(api_error(openai.RateLimitError, 429, **{"retry-after": "0.2"}))) == (
        pytest.approx(0.2)
    )
    assert (
        policy.wait(_state(api_error(openai.RateLimitError, 429, **{"retry-after": "600"}))) == 5.0
    )


def test_wait_falls_back_to_backoff():
    policy = RetryPolicy(base_delay=0.4, max_delay=0.8)
    assert 0.2 <= policy.wait(_state(TimeoutError(), attempt=1)) <= 0.4
    assert 0.4 <= policy.wait(_state(TimeoutError(), attempt=5)) <= 0.8
    assert RetryPolicy(base_delay=0.0).wait(_state(ConnectionError(), attempt=3)) == 0.0
    assert 0.2 <= policy.wait(_state(None)) <= 0.4  # no outcome yet


def test_describe_for_logs():
    policy = RetryPolicy(timeout=5.0)
    assert policy.describe(TimeoutError()) == "no answer within 5.0s"
    assert policy.describe(StatusError(503, "overloaded")) == "HTTP 503: overloaded"
    described = policy.describe(api_error(openai.RateLimitError, 429))
    assert "429" in described and not described.startswith("HTTP 429: Error code: 429")
    assert len(policy.describe(ValueError("x" * 1000))) <= 200
