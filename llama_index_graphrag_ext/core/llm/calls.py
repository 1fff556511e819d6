"""``LLMCaller``: the one way the suite calls an LLM.

Every LLM step of every method goes through a caller, which adds to any
LlamaIndex ``LLM``:

* **one event loop** (:mod:`.loop`): calls run on the suite's loop, so pooled
  connections of async clients stay valid, and no caller's loop is blocked;
* **one retry layer** (:mod:`.retry`, tenacity): 429 (``Retry-After``), 5xx,
  time-outs and broken connections are retried; 400/401/403 are not. The LLM
  is called through a copy whose client does not retry on its own;
* **replies read as models write them** (:mod:`.parse`): reasoning blocks
  dropped; structured output through LlamaIndex's structured prediction where
  the model supports it (JSON schema, function calling), else JSON read with
  ``json-repair`` and re-asked once when unusable;
* **no cut reply accepted as complete**: a reply stopped by the length limit
  is asked again with twice the limit (up to the context window), else it
  fails as :class:`LLMTruncatedError`; ``max_tokens`` is set per call from
  what each prompt needs;
* **a response cache** (:class:`.cache.LLMCache`): only complete, usable
  answers are stored, so an interrupted run resumes without paying twice;
* **bounded concurrency** (``amap``) and **usage** counted from what the
  provider reports (:mod:`.usage`): calls, tokens, retries, failures.

Streams get the same treatment: served from the cache when possible, retried
until the first token, counted, and cached once complete.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import threading
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from llama_index.core.llms import CustomLLM
from llama_index.core.prompts import PromptTemplate
from pydantic import BaseModel, ValidationError
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt

from .cache import LLMCache, cache_key, llm_fingerprint
from .loop import iterate_async, iterate_sync, on_suite_loop, run_sync
from .parse import LLMOutputError, strip_reasoning, validate_reply
from .resolve import accepts_max_tokens, describe_llm, structured_mode
from .retry import RetryPolicy, status_of
from .steps import LLMFallbackError
from .usage import UsageMeter, capture, finish_reason, fresh_call_depth

logger = logging.getLogger(__name__)

__all__ = ["LLMCaller", "LLMTruncatedError", "Reply", "call_copy"]

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")

_REPAIR_NOTE = (
    "\n\nYour previous reply could not be used ({error}). Reply again with only the "
    "requested JSON, nothing before or after it."
)
#: How many times a cut reply is asked again with twice the limit.
_LENGTH_RETRIES = 2


class LLMTruncatedError(LLMOutputError):
    """A reply stopped by the length limit that could not be completed."""


@dataclass(frozen=True)
class Reply:
    """One completed reply.

    Attributes:
        text: The reply without reasoning blocks.
        raw: The reply as the model wrote it.
        finish_reason: Why it ended (``stop``, ...; ``None`` when the provider does not say).
        from_cache: Served from the response cache.
    """

    text: str
    raw: str
    finish_reason: str | None = None
    from_cache: bool = False


def call_copy(llm: Any, policy: RetryPolicy) -> Any:
    """The copy of ``llm`` the suite calls: one retry layer, and a client of its own.

    Clients with their own retries (``max_retries``) get none, so the suite's
    policy is the only layer; the HTTP time-out follows the policy; an
    instance-wide ``max_tokens`` is dropped in favour of each call's (the
    caller passes the instance's value when a call sets none); OpenAI-style
    clients are asked for usage at the end of streams. The copy opens its own
    connections on the suite's loop instead of sharing the user's object's
    pooled client, which LlamaIndex's components may use from other loops.
    LLMs without such settings are used as they are.
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


def _output_ceiling(llm: Any) -> int | None:
    """The output limit the user set on the LLM itself (OpenAI's ``max_tokens``, llama.cpp's
    ``max_new_tokens``): per-call limits never go beyond it."""
    for attr in ("max_tokens", "max_new_tokens"):
        value = getattr(llm, attr, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def _blocking(llm: Any) -> bool:
    """An LLM whose async methods compute in the calling thread (llama.cpp and other CustomLLMs)."""
    return isinstance(llm, CustomLLM) and type(llm).acomplete is CustomLLM.acomplete


# One lock per blocking LLM object: llama.cpp's model is not thread-safe.
_BLOCKING_LOCKS: weakref.WeakKeyDictionary[Any, threading.Lock] = weakref.WeakKeyDictionary()
_LOCKS_GUARD = threading.Lock()


def _lock_of(llm: Any) -> threading.Lock:
    with _LOCKS_GUARD:
        lock = _BLOCKING_LOCKS.get(llm)
        if lock is None:
            lock = _BLOCKING_LOCKS[llm] = threading.Lock()
        return lock


class LLMCaller:
    """Calls one LLM for one component (see the module docs).

    Args:
        llm: Any LlamaIndex ``LLM``.
        cache: A response cache; ``None`` disables caching.
        retry: The retry policy (default ``RetryPolicy()``).
        max_concurrency: Calls in flight at once (``amap`` and every call share it).
        meter: The usage meter to update (a fresh one by default).

    Attributes:
        llm: The LLM as given (its class and model name are what logs report).
        mode: How structured output is asked for (``json_schema``,
            ``function_calling`` or ``text``; see :func:`.resolve.structured_mode`).
    """

    def __init__(
        self,
        llm: Any,
        *,
        cache: LLMCache | None = None,
        retry: RetryPolicy | None = None,
        max_concurrency: int = 4,
        meter: UsageMeter | None = None,
    ) -> None:
        if llm is None:
            raise ValueError("LLMCaller needs an LLM")
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be >= 1, got {max_concurrency}")
        self.llm = llm
        self.cache = cache
        self.retry = retry or RetryPolicy()
        self.max_concurrency = int(max_concurrency)
        self.meter = meter if meter is not None else UsageMeter()
        self.mode = structured_mode(llm)
        self._target = call_copy(llm, self.retry)
        self._fingerprint = llm_fingerprint(llm)
        self._sized = accepts_max_tokens(llm)
        self._ceiling = _output_ceiling(llm)
        # Bound to a loop on first use: the suite's loop, the only one it serves.
        self._semaphore = asyncio.Semaphore(self.max_concurrency)

    def __repr__(self) -> str:
        return f"LLMCaller({describe_llm(self.llm)}, mode={self.mode}, cache={self.cache!r})"

    def with_meter(self, meter: UsageMeter) -> LLMCaller:
        """This caller counting into ``meter`` (one query's usage); client, cache and bound shared."""
        view = copy.copy(self)
        view.meter = meter
        return view

    # ------------------------------------------------------------------ plumbing

    def cache_key(self, prompt: str, kind: str = "text") -> str:
        """The key a reply to ``prompt`` is cached under (the length limit is not part of it)."""
        return cache_key(self._fingerprint, prompt, {"kind": kind})

    def _sem(self) -> asyncio.Semaphore:
        return self._semaphore

    def _window(self) -> int:
        try:
            return int(self.llm.metadata.context_window)
        except Exception:  # metadata that needs a live connection
            return 8192

    def _limit_kwargs(self, limit: int | None) -> dict[str, Any]:
        """``max_tokens`` for one request: what the prompt needs, within the LLM's own ceiling."""
        limit = min(limit, self._ceiling) if (limit and self._ceiling) else (limit or self._ceiling)
        return {"max_tokens": int(limit)} if (limit and self._sized) else {}

    async def _retrying(
        self,
        attempt: Callable[[], Awaitable[T]],
        what: str,
        expected: Callable[[BaseException], bool] | None = None,
    ) -> T:
        """Run ``attempt`` under the retry policy, counting retries and failures.

        Unusable output (:class:`LLMOutputError`, a pydantic ``ValidationError``)
        and cancellation are the caller's to count; so are errors ``expected``
        accepts (a server refusing native structured output, which the caller
        handles by asking in text).
        """
        policy = self.retry

        def before_sleep(state: Any) -> None:
            exc = state.outcome.exception()
            self.meter.add(retries=1)
            logger.warning(
                "%s: attempt %d/%d failed (%s: %s); retrying in %.2fs",
                what,
                state.attempt_number,
                policy.max_attempts,
                type(exc).__name__,
                policy.describe(exc),
                state.next_action.sleep if state.next_action else 0.0,
            )

        try:
            async for attempt_state in AsyncRetrying(
                stop=stop_after_attempt(policy.max_attempts),
                wait=policy.wait,
                retry=retry_if_exception(policy.retryable),
                before_sleep=before_sleep,
                reraise=True,
            ):
                with attempt_state:
                    result = await attempt()
        except (LLMOutputError, ValidationError, asyncio.CancelledError):
            raise
        except Exception as exc:
            if expected is not None and expected(exc):
                raise
            self.meter.add(failures=1)
            logger.error(
                "%s failed for good: %s: %s", what, type(exc).__name__, policy.describe(exc)
            )
            raise
        return result

    async def _timed(self, coro: Awaitable[T]) -> T:
        timeout = self.retry.timeout
        return await (asyncio.wait_for(coro, timeout) if timeout is not None else coro)

    async def _request(self, prompt: str, limit: int | None) -> tuple[str, str | None]:
        """One request: ``(text, finish_reason)``; usage counted from the provider's answer."""
        kwargs = self._limit_kwargs(limit)
        async with self._sem():
            self.meter.add(calls=1)
            with fresh_call_depth(), capture() as cap:
                if _blocking(self._target):
                    lock = _lock_of(self._target)

                    def call() -> Any:
                        with lock:
                            return self._target.complete(prompt, **kwargs)

                    response = await self._timed(asyncio.to_thread(call))
                else:
                    response = await self._timed(self._target.acomplete(prompt, **kwargs))
            prompt_tokens, completion_tokens = cap.tokens(prompt)
        self.meter.add(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)
        text = "" if getattr(response, "text", None) is None else str(response.text)
        return text, finish_reason(response)

    def _next_limit(self, limit: int | None, prompt: str) -> int | None:
        """Twice the limit, within the context window and the LLM's ceiling; ``None``: it cannot grow."""
        from ..text.tokens import count_tokens

        room = self._window() - count_tokens(prompt) - 16
        if self._ceiling:
            room = min(room, self._ceiling)
        current = min(limit, self._ceiling) if (limit and self._ceiling) else limit
        if not self._sized or room <= 0:
            return None
        grown = min(room, 2 * current) if current else room
        return grown if (current is None or grown > current) else None

    async def _complete(self, prompt: str, limit: int | None, allow_cut: bool = False) -> Reply:
        """A complete reply: retried on transient errors, asked again with more room when cut.

        A reply that stays cut raises :class:`LLMTruncatedError`; with
        ``allow_cut`` (free-text answers, never structured output) it is
        returned with ``finish_reason="length"``, counted and logged.
        """
        for round_ in range(_LENGTH_RETRIES + 1):
            text, reason = await self._retrying(
                lambda limit=limit: self._request(prompt, limit), f"LLM call ({self.llm_name})"
            )
            if reason != "length":
                return Reply(strip_reasoning(text), text, reason)
            bigger = self._next_limit(limit, prompt) if round_ < _LENGTH_RETRIES else None
            if bigger is None:
                break
            self.meter.add(length_retries=1)
            logger.info("reply cut at %s tokens; asking again with %d", limit, bigger)
            limit = bigger
        self.meter.add(truncated=1)
        ceiling = f" (the LLM's own ceiling is {self._ceiling})" if self._ceiling else ""
        if allow_cut:
            logger.warning(
                "%s: reply still cut by the length limit after %d re-ask(s)%s; kept as cut",
                self.llm_name,
                _LENGTH_RETRIES,
                ceiling,
            )
            return Reply(strip_reasoning(text), text, "length")
        raise LLMTruncatedError(
            f"reply cut by the length limit ({limit} tokens){ceiling}", raw=text
        )

    @property
    def llm_name(self) -> str:
        """``Class(model)`` of the LLM, for logs."""
        return describe_llm(self.llm)

    # ------------------------------------------------------------------ text

    async def acomplete(
        self,
        prompt: str,
        *,
        max_tokens: int | None = None,
        accept: Callable[[str], bool] | None = None,
        allow_cut: bool = False,
    ) -> Reply:
        """A complete reply to ``prompt``, from the cache when it holds one.

        Args:
            prompt: The prompt.
            max_tokens: What the reply may need (grown when the reply is cut,
                never beyond the LLM's own ``max_tokens`` / ``max_new_tokens``).
            accept: Check of a usable reply (given the text without reasoning);
                replies it rejects are returned but never cached, and a cached
                reply it rejects is asked again.
            allow_cut: Return a reply that stays cut by the length limit (marked
                ``finish_reason="length"``, counted in ``truncated``, not cached)
                instead of raising. For free-text answers only.

        Raises:
            LLMTruncatedError: The reply stayed cut by the length limit.
            Exception: The LLM's error, once retries are spent or not worth it.
        """
        return await on_suite_loop(self._acomplete(prompt, max_tokens, accept, allow_cut))

    async def _acomplete(
        self,
        prompt: str,
        limit: int | None,
        accept: Callable[[str], bool] | None,
        allow_cut: bool = False,
    ) -> Reply:
        key = self.cache_key(prompt) if self.cache is not None else None
        if key is not None:
            cached = self.cache.get(key)
            if cached is not None:
                reply = Reply(strip_reasoning(cached), cached, "stop", from_cache=True)
                if accept is None or accept(reply.text):
                    self.meter.add(cache_hits=1)
                    return reply
        reply = await self._complete(prompt, limit, allow_cut)
        complete = reply.finish_reason != "length"
        if key is not None and complete and (accept is None or accept(reply.text)):
            self.cache.put(key, reply.raw)
        return reply

    def complete(self, prompt: str, **kwargs: Any) -> Reply:
        """Synchronous :meth:`acomplete`."""
        return run_sync(lambda: self.acomplete(prompt, **kwargs))

    # ------------------------------------------------------------------ structured

    async def astructured(
        self,
        prompt: str,
        output_cls: type[M],
        *,
        max_tokens: int | None = None,
        repair_attempts: int = 1,
        check: Callable[[M], M] | None = None,
    ) -> M:
        """A pydantic ``output_cls`` from the LLM.

        Natively (JSON schema or a forced tool call through LlamaIndex's
        ``astructured_predict``) where the LLM supports it, else from the text
        reply read by :func:`.parse.validate_reply`; an unusable reply is asked
        again ``repair_attempts`` times. A server that rejects native
        structured output (some OpenAI-compatible servers do) switches this
        caller to text, once, with a warning.

        Args:
            prompt: The prompt; it should describe the JSON wanted (text mode reads it).
            output_cls: The pydantic model.
            max_tokens: What the reply may need.
            repair_attempts: Re-asks after an unusable reply.
            check: Extra validation of the result (raise ``ValueError`` to reject it).

        Raises:
            LLMOutputError: No usable result (counted in ``parse_failures``).
        """
        return await on_suite_loop(
            self._astructured(prompt, output_cls, max_tokens, repair_attempts, check)
        )

    async def _astructured(
        self,
        prompt: str,
        output_cls: type[M],
        limit: int | None,
        repair_attempts: int,
        check: Callable[[M], M] | None,
    ) -> M:
        kind = f"structured:{output_cls.__name__}"
        key = self.cache_key(prompt, kind) if self.cache is not None else None
        if key is not None and (cached := self.cache.get(key)) is not None:
            try:
                value = output_cls.model_validate_json(cached)
                value = check(value) if check else value
                self.meter.add(cache_hits=1)
                return value
            except (ValidationError, ValueError):
                logger.debug("cached %s no longer validates; asking again", output_cls.__name__)
        current, last_error = prompt, None
        for attempt in range(repair_attempts + 1):
            try:
                if self.mode != "text":
                    value = await self._native(current, output_cls, limit)
                else:
                    reply = await self._complete(current, limit)
                    # Repairing a degenerate reply can take seconds: not on the loop.
                    value = await asyncio.to_thread(validate_reply, output_cls, reply.raw)
                value = _checked(check, value)
            except LLMTruncatedError:
                self.meter.add(parse_failures=1)
                raise
            except (LLMOutputError, ValidationError) as exc:
                last_error = exc
                logger.debug("unusable %s (attempt %d): %s", output_cls.__name__, attempt + 1, exc)
                clipped = " ".join(str(exc).split())[:160]
                current = prompt + _REPAIR_NOTE.format(error=clipped)
                continue
            if key is not None:
                self.cache.put(key, value.model_dump_json())
            return value
        self.meter.add(parse_failures=1)
        raise LLMOutputError(
            f"no usable {output_cls.__name__} after {repair_attempts + 1} attempt(s): {last_error}",
            raw=getattr(last_error, "raw", None),
        ) from last_error

    async def _native(self, prompt: str, output_cls: type[M], limit: int | None) -> M:
        """Structured prediction through LlamaIndex; a cut reply is asked again with more room."""
        template = PromptTemplate(prompt)  # already formatted; braces pass through untouched
        for round_ in range(_LENGTH_RETRIES + 1):
            reasons: list[str | None] = []

            async def attempt(limit: int | None = limit, reasons: list = reasons) -> M:
                async with self._sem():
                    self.meter.add(calls=1)
                    with fresh_call_depth(), capture() as cap:
                        try:
                            return await self._timed(
                                self._target.astructured_predict(
                                    output_cls, template, llm_kwargs=self._limit_kwargs(limit)
                                )
                            )
                        finally:
                            tokens = cap.tokens(prompt) if cap.last else (0, 0)
                            self.meter.add(prompt_tokens=tokens[0], completion_tokens=tokens[1])
                            reasons.append(finish_reason(cap.last[1]) if cap.last else None)

            try:
                return await self._retrying(
                    attempt, f"structured call ({self.llm_name})", expected=_rejected_by_server
                )
            except Exception as exc:
                if reasons and reasons[-1] == "length":
                    last_round = round_ == _LENGTH_RETRIES
                    bigger = None if last_round else self._next_limit(limit, prompt)
                    if bigger is not None:
                        self.meter.add(length_retries=1)
                        limit = bigger
                        continue
                    self.meter.add(truncated=1)
                    raise LLMTruncatedError("structured reply cut by the length limit") from exc
                if _rejected_by_server(exc):
                    logger.warning(
                        "%s rejected %s structured output (%s); asking for JSON in text from now on",
                        self.llm_name,
                        self.mode,
                        self.retry.describe(exc),
                    )
                    self.mode = "text"
                    reply = await self._complete(prompt, limit)
                    return await asyncio.to_thread(validate_reply, output_cls, reply.raw)
                if isinstance(exc, ValidationError) or _no_tool_call(exc):
                    raise LLMOutputError(f"unusable structured reply: {exc}") from exc
                raise
        raise LLMTruncatedError("structured reply cut by the length limit")

    def structured(self, prompt: str, output_cls: type[M], **kwargs: Any) -> M:
        """Synchronous :meth:`astructured`."""
        return run_sync(lambda: self.astructured(prompt, output_cls, **kwargs))

    # ------------------------------------------------------------------ streams

    def astream(self, prompt: str, *, max_tokens: int | None = None) -> AsyncIterator[str]:
        """Stream a reply's text pieces (see the module docs); the whole reply is cached."""
        return iterate_async(lambda: self._astream(prompt, max_tokens))

    def stream(self, prompt: str, *, max_tokens: int | None = None) -> Iterator[str]:
        """Synchronous :meth:`astream`."""
        return iterate_sync(lambda: self._astream(prompt, max_tokens))

    async def _astream(self, prompt: str, limit: int | None) -> AsyncIterator[str]:
        key = self.cache_key(prompt) if self.cache is not None else None
        if key is not None and (cached := self.cache.get(key)) is not None:
            self.meter.add(cache_hits=1)
            yield strip_reasoning(cached)
            return
        kwargs = self._limit_kwargs(limit)
        chunks: list[str] = []
        reason: str | None = None
        with fresh_call_depth(), capture() as cap:
            stream = await self._retrying(
                lambda: self._open_stream(prompt, kwargs), f"LLM stream ({self.llm_name})"
            )
            async for response in stream:
                delta = getattr(response, "delta", None) or ""
                reason = finish_reason(response) or reason
                chunks.append(delta)
                yield delta
            tokens = cap.tokens(prompt)
        self.meter.add(prompt_tokens=tokens[0], completion_tokens=tokens[1])
        text = "".join(chunks)
        if reason == "length":
            self.meter.add(truncated=1)
            logger.warning("streamed reply of %s cut by the length limit", self.llm_name)
        elif key is not None:
            self.cache.put(key, text)

    async def _open_stream(self, prompt: str, kwargs: dict[str, Any]) -> AsyncIterator[Any]:
        """Open a stream and wait for its first piece (errors before it are retried)."""
        self.meter.add(calls=1)
        if _blocking(self._target):
            source = _thread_stream(self._target, prompt, kwargs)
        else:
            source = await self._timed(self._target.astream_complete(prompt, **kwargs))
        iterator = source.__aiter__()
        try:
            first = await self._timed(iterator.__anext__())
        except StopAsyncIteration:
            first = None

        async def rest() -> AsyncIterator[Any]:
            if first is not None:
                yield first
                async for item in iterator:
                    yield item

        return rest()

    # ------------------------------------------------------------------ fan-out

    async def amap(
        self,
        items: Sequence[Any],
        fn: Callable[[Any], Awaitable[T]],
        *,
        show_progress: bool = False,
        desc: str = "LLM",
    ) -> list[T | BaseException]:
        """``fn`` over ``items`` on the suite's loop, at most ``max_concurrency`` at once.

        Returns one result per item in order; a failed item's slot holds its
        exception (callers count and log them), except
        :class:`~.steps.LLMFallbackError` and cancellation, which propagate.
        """
        return await on_suite_loop(self._amap(list(items), fn, show_progress, desc))

    async def _amap(
        self, items: list[Any], fn: Callable[[Any], Awaitable[T]], show_progress: bool, desc: str
    ) -> list[T | BaseException]:
        results: list[Any] = [None] * len(items)
        if not items:
            return results
        bar = None
        if show_progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=len(items), desc=desc)
        pending = iter(enumerate(items))

        async def worker() -> None:
            for index, item in pending:
                try:
                    results[index] = await fn(item)
                except Exception as exc:
                    if isinstance(exc, LLMFallbackError):
                        raise
                    results[index] = exc
                finally:
                    if bar is not None:
                        bar.update(1)

        tasks = [
            asyncio.ensure_future(worker()) for _ in range(min(self.max_concurrency, len(items)))
        ]
        try:
            await asyncio.gather(*tasks)
        except BaseException:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        finally:
            if bar is not None:
                bar.close()
        return results

    def map(self, items: Sequence[Any], fn: Callable[[Any], Awaitable[T]], **kwargs: Any) -> list:
        """Synchronous :meth:`amap` (``fn`` is still async)."""
        return run_sync(lambda: self.amap(items, fn, **kwargs))


def _checked(check: Callable[[M], M] | None, value: M) -> M:
    """``check(value)``, its ``ValueError`` read as an unusable reply."""
    if check is None:
        return value
    try:
        return check(value)
    except ValueError as exc:
        raise LLMOutputError(str(exc)) from exc


def _no_tool_call(exc: BaseException) -> bool:
    """LlamaIndex's function-calling program found no (valid) tool call in the reply."""
    return isinstance(exc, ValueError) and "tool call" in str(exc).lower()


def _rejected_by_server(exc: BaseException) -> bool:
    """A 400/404/422 answer to a request with ``tools`` or ``response_format``."""
    return status_of(exc) in (400, 404, 422)


async def _thread_stream(llm: Any, prompt: str, kwargs: dict[str, Any]) -> AsyncIterator[Any]:
    """A blocking LLM's ``stream_complete`` consumed in a worker thread."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[Any] = asyncio.Queue()
    done = object()
    lock = _lock_of(llm)

    def produce() -> None:
        try:
            with lock:
                for item in llm.stream_complete(prompt, **kwargs):
                    loop.call_soon_threadsafe(queue.put_nowait, item)
        except BaseException as exc:  # handed to the consumer
            loop.call_soon_threadsafe(queue.put_nowait, exc)
        loop.call_soon_threadsafe(queue.put_nowait, done)

    worker = loop.run_in_executor(None, produce)
    while True:
        item = await queue.get()
        if item is done:
            break
        if isinstance(item, BaseException):
            raise item
        yield item
    await worker
