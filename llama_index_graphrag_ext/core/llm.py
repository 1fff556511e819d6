"""Structured LLM calls: JSON with repair, retries, bounded concurrency, usage.

Every method in this package asks an LLM for short structured answers (query
lists, triples, knowledge units). [`StructuredLLM`][llama_index_graphrag_ext.core.llm.StructuredLLM]
wraps any LlamaIndex ``LLM`` and adds what such pipelines need:

- a persistent response cache ([`LLMCache`][llama_index_graphrag_ext.core.cache.LLMCache]),
- retries with exponential back-off and a per-call timeout ([`RetryPolicy`][llama_index_graphrag_ext.core.llm.RetryPolicy]),
- bounded concurrency for async fan-out (``amap``),
- tolerant JSON parsing with a re-ask on failure (``ajson``),
- call, token, retry and failure counts ([`UsageMeter`][llama_index_graphrag_ext.core.llm.UsageMeter]).

All calls still go through ``llm.acomplete``, so LlamaIndex callbacks (such as
``TokenCountingHandler``) and instrumentation handlers see each of them.

Example:
    >>> from llama_index_graphrag_ext.testing import ScriptedLLM
    >>> s = StructuredLLM(ScriptedLLM(['```json\\n{"a": 1,}\\n```']))
    >>> s.json("Give me JSON")
    {'a': 1}
"""

from __future__ import annotations

import ast
import asyncio
import contextvars
import json
import logging
import random
import re
import threading
import weakref
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from llama_index_graphrag_ext.core.cache import LLMCache, cache_key, llm_fingerprint

logger = logging.getLogger(__name__)

__all__ = [
    "LLMOutputError",
    "RetryPolicy",
    "StructuredLLM",
    "UsageMeter",
    "estimate_tokens",
    "parse_json_lenient",
    "parse_numbered_lines",
    "reported_usage",
    "run_sync",
]

T = TypeVar("T")


# --------------------------------------------------------------------------- errors


class LLMOutputError(ValueError):
    """LLM output that could not be parsed into the requested shape.

    Args:
        message: What went wrong.
        raw: The offending model output.

    Attributes:
        raw: The offending model output, kept for logging and debugging.
    """

    def __init__(self, message: str, raw: str | None = None) -> None:
        super().__init__(message)
        self.raw = raw

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (str(self), self.raw))


# --------------------------------------------------------------------------- sync shim


def run_sync(factory: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run a coroutine to completion from synchronous code.

    Without a running event loop this is ``asyncio.run``. Inside a running loop
    (a notebook, an async web handler) the coroutine runs on a fresh loop in a
    worker thread while the caller blocks, which avoids "event loop is already
    running" errors. Context variables (instrumentation spans) are carried over.

    Args:
        factory: A zero-argument callable returning the coroutine; it is called
            in the thread that runs the coroutine.

    Returns:
        The coroutine's result.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(factory())
    ctx = contextvars.copy_context()
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="graphrag-ext-sync") as pool:
        return pool.submit(ctx.run, lambda: asyncio.run(factory())).result()


# --------------------------------------------------------------------------- retry policy


@dataclass
class RetryPolicy:
    """How LLM calls are retried.

    Between attempts the wait grows as ``base_delay * 2 ** (attempt - 1)``,
    capped at ``max_delay``, with "equal jitter" (a random value between half
    and all of it) so that concurrent callers do not retry in lockstep.
    ``asyncio.CancelledError`` and ``KeyboardInterrupt`` are never retried.

    The timeout is enforced with ``asyncio.wait_for``; it can only interrupt
    LLMs whose ``acomplete`` is truly asynchronous (remote APIs). LLMs that
    compute inside ``acomplete`` without awaiting (llama.cpp) cannot be stopped
    mid-call.

    Attributes:
        max_attempts: Total attempts per call, including the first (>= 1).
        base_delay: Seconds before the first retry.
        max_delay: Upper bound on any single wait.
        timeout: Seconds allowed per attempt, or ``None`` for no limit.
        retry_on: Exception types that trigger a retry; others fail at once.
    """

    max_attempts: int = 3
    base_delay: float = 0.5
    max_delay: float = 8.0
    timeout: float | None = 120.0
    retry_on: tuple[type[BaseException], ...] = (Exception,)

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, got {self.max_attempts}")
        if self.base_delay < 0 or self.max_delay < 0:
            raise ValueError("base_delay and max_delay must be >= 0")
        if self.timeout is not None and self.timeout <= 0:
            raise ValueError(f"timeout must be > 0 or None, got {self.timeout}")

    def backoff(self, attempt: int) -> float:
        """Return the wait in seconds after failed attempt number ``attempt`` (1-based).

        Args:
            attempt: The attempt that just failed.

        Returns:
            A jittered delay in ``[d / 2, d]`` where ``d`` is the capped exponential delay.
        """
        delay = min(self.max_delay, self.base_delay * (2 ** max(0, attempt - 1)))
        if delay <= 0:
            return 0.0
        return delay / 2 + random.uniform(0, delay / 2)

    def should_retry(self, exc: BaseException) -> bool:
        """Whether ``exc`` is worth another attempt under this policy.

        Args:
            exc: The error raised by the last attempt.

        Returns:
            ``True`` if it matches ``retry_on`` and is not a cancellation or interrupt.
        """
        if isinstance(exc, (asyncio.CancelledError, KeyboardInterrupt, SystemExit)):
            return False
        return isinstance(exc, self.retry_on)


# --------------------------------------------------------------------------- usage


class UsageMeter:
    """Thread-safe counters of LLM usage.

    Read counters as attributes (``meter.calls``); update them through
    [`add`][llama_index_graphrag_ext.core.llm.UsageMeter.add]. One meter may be
    shared by several [`StructuredLLM`][llama_index_graphrag_ext.core.llm.StructuredLLM]
    objects to total a whole pipeline.

    Attributes:
        calls: Real LLM calls made (every attempt, including failed ones).
        cache_hits: Answers served from the cache instead of the LLM.
        prompt_tokens: Prompt tokens, as reported by the LLM or estimated.
        completion_tokens: Completion tokens, as reported or estimated.
        retries: Attempts that failed and were retried.
        failures: Calls that failed for good (retries exhausted or not retryable).
        parse_failures: Outputs that stayed unparseable after all repair attempts.
    """

    FIELDS: ClassVar[tuple[str, ...]] = (
        "calls",
        "cache_hits",
        "prompt_tokens",
        "completion_tokens",
        "retries",
        "failures",
        "parse_failures",
    )

    calls: int
    cache_hits: int
    prompt_tokens: int
    completion_tokens: int
    retries: int
    failures: int
    parse_failures: int

    def __init__(self) -> None:
        self._lock = threading.Lock()
        for name in self.FIELDS:
            setattr(self, name, 0)

    def add(self, **counts: int) -> None:
        """Add to one or more counters atomically.

        Args:
            **counts: Counter names and the amounts to add, e.g. ``calls=1``.

        Raises:
            KeyError: For an unknown counter name.
        """
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
        """Return a consistent copy of all counters, plus ``total_tokens``."""
        with self._lock:
            data = {name: getattr(self, name) for name in self.FIELDS}
        data["total_tokens"] = data["prompt_tokens"] + data["completion_tokens"]
        return data

    def reset(self) -> None:
        """Set every counter back to zero."""
        with self._lock:
            for name in self.FIELDS:
                setattr(self, name, 0)

    def merge(self, other: UsageMeter) -> UsageMeter:
        """Add another meter's counts into this one.

        Args:
            other: The meter to add.

        Returns:
            This meter, for chaining.
        """
        counts = other.snapshot()
        counts.pop("total_tokens")
        self.add(**counts)
        return self

    def __add__(self, other: UsageMeter) -> UsageMeter:
        if not isinstance(other, UsageMeter):
            return NotImplemented
        return UsageMeter().merge(self).merge(other)

    def __repr__(self) -> str:
        body = ", ".join(f"{k}={v}" for k, v in self.snapshot().items())
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
        except Exception:
            return None
        return data if isinstance(data, Mapping) else None
    if hasattr(obj, "__dict__"):
        return vars(obj)
    return None


def _first_int(usage: Mapping[str, Any], keys: tuple[str, ...]) -> int | None:
    for key in keys:
        value = usage.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return int(value)
    return None


def reported_usage(response: Any) -> tuple[int | None, int | None]:
    """Read token counts that an LLM reported in a ``CompletionResponse``.

    Looks at ``response.raw["usage"]`` (OpenAI style ``prompt_tokens`` /
    ``completion_tokens`` or Anthropic style ``input_tokens`` /
    ``output_tokens``), then at ``response.additional_kwargs``.

    Args:
        response: A LlamaIndex ``CompletionResponse``.

    Returns:
        ``(prompt_tokens, completion_tokens)``, each ``None`` when not reported.
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


def estimate_tokens(text: str) -> int:
    """Count tokens with LlamaIndex's global tokenizer (tiktoken by default).

    Falls back to a whitespace word count if the tokenizer is unavailable.

    Args:
        text: Any text.

    Returns:
        The token count.
    """
    if not text:
        return 0
    try:
        from llama_index.core.utils import get_tokenizer

        return len(get_tokenizer()(text))
    except Exception:  # tokenizer files missing in an air-gapped install
        logger.debug("tokenizer unavailable; estimating tokens by words", exc_info=True)
        return len(text.split())


# --------------------------------------------------------------------------- JSON parsing

_SMART_DOUBLE = "\u201c\u201d\u201e\u201f\u00ab\u00bb"
_SMART_SINGLE = "\u2018\u2019\u201a\u201b"
_QUOTES = '"' + "'" + _SMART_DOUBLE + _SMART_SINGLE
_DELIMS = ",:{}[]" + _QUOTES
_CLOSERS = {"{": "}", "[": "]"}
_LITERALS = {
    "true": "true",
    "True": "true",
    "TRUE": "true",
    "false": "false",
    "False": "false",
    "FALSE": "false",
    "null": "null",
    "None": "null",
    "none": "null",
    "NULL": "null",
    "NaN": "NaN",
    "Infinity": "Infinity",
    "-Infinity": "-Infinity",
}
_JSON_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?\Z")
_KEY = re.compile(r"[A-Za-z_$][\w$\-]*\Z")
_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\n?(.*?)(?:```|\Z)", re.DOTALL)
_MAX_STARTS = 24


def _closing_quote(text: str, i: int) -> bool:
    """Whether the quote at ``text[i]`` ends a string (it is followed by a delimiter)."""
    j = i + 1
    n = len(text)
    while j < n and text[j] in " \t\r\n":
        j += 1
    return j >= n or text[j] in _DELIMS


def _read_string(text: str, i: int) -> tuple[str, int]:
    """Read a quoted string starting at ``text[i]``; return its JSON form and the next index.

    Accepts double, single and typographic quotes. A quote that is not followed
    by a delimiter is taken as part of the text (``'O'Brien'``), which also
    rescues unescaped inner double quotes.
    """
    opener = text[i]
    if opener in _SMART_DOUBLE:
        closers = _SMART_DOUBLE + '"'
    elif opener in _SMART_SINGLE:
        closers = _SMART_SINGLE
    else:
        closers = opener
    chars: list[str] = []
    j = i + 1
    n = len(text)
    while j < n:
        ch = text[j]
        if ch == "\\" and j + 1 < n:
            nxt = text[j + 1]
            if nxt in "'" + _SMART_SINGLE:
                chars.append(nxt)  # \' is not a JSON escape
            elif nxt in '"\\/bfnrtu':
                chars.append(ch + nxt)
            else:
                chars.append("\\\\" + nxt)
            j += 2
            continue
        if ch in closers and _closing_quote(text, j):
            return '"' + "".join(chars) + '"', j + 1
        if ch == '"':
            chars.append('\\"')
        elif ch == "\n":
            chars.append("\\n")
        elif ch == "\r":
            chars.append("\\r")
        elif ch == "\t":
            chars.append("\\t")
        elif ord(ch) < 0x20:
            chars.append(f"\\u{ord(ch):04x}")
        else:
            chars.append(ch)
        j += 1
    # Unterminated (truncated output): close it.
    return '"' + "".join(chars) + '"', n


def _scan(text: str, start: int, quote_bare_values: bool) -> tuple[str, str, bool]:
    """Scan one bracketed span from ``text[start]`` and repair it into JSON.

    Returns:
        ``(raw_span, repaired, balanced)``: the original span, the repaired
        JSON text, and whether the brackets closed before the end of ``text``.
    """
    out: list[str] = []
    stack: list[str] = []
    last = "start"  # start | open | value | comma | colon | key
    i = start
    n = len(text)

    def new_item() -> None:
        if last == "value" and stack:
            out.append(",")

    while i < n:
        ch = text[i]
        if ch in " \t\r\n":
            i += 1
            continue
        if ch in "{[":
            new_item()
            stack.append(ch)
            out.append(ch)
            last = "open"
            i += 1
            continue
        if ch in "}]":
            while out and out[-1] == ",":
                out.pop()
            if last == "colon":
                out.append("null")
            if stack:
                out.append(_CLOSERS[stack.pop()])
            last = "value"
            i += 1
            if not stack:
                return text[start:i], "".join(out), True
            continue
        if ch == ",":
            if last not in ("open", "comma", "start"):
                out.append(",")
                last = "comma"
            i += 1
            continue
        if ch == ":":
            out.append(":")
            last = "colon"
            i += 1
            continue
        if ch in _QUOTES:
            new_item()
            literal, i = _read_string(text, i)
            out.append(literal)
            last = "value"
            continue
        if ch == "/" and i + 1 < n and text[i + 1] in "/*":
            if text[i + 1] == "/":
                end = text.find("\n", i)
                i = n if end < 0 else end
            else:
                end = text.find("*/", i + 2)
                i = n if end < 0 else end + 2
            continue
        # A bare token: literal, number, unquoted key or unquoted word.
        j = i
        while j < n and text[j] not in _DELIMS and text[j] not in " \t\r\n":
            j += 1
        token = text[i:j]
        k = j
        while k < n and text[k] in " \t\r\n":
            k += 1
        is_key = k < n and text[k] == ":" and bool(stack) and stack[-1] == "{"
        new_item()
        if is_key and last in ("open", "comma", "value") and _KEY.match(token):
            out.append(json.dumps(token))
        elif token in _LITERALS:
            out.append(_LITERALS[token])
        elif _JSON_NUMBER.match(token):
            out.append(token)
        elif _number(token) is not None:
            out.append(_number(token))  # type: ignore[arg-type]
        elif quote_bare_values and _KEY.match(token):
            out.append(json.dumps(token))
        else:
            out.append(token)
        last = "value"
        i = j
    # Ran off the end: close what is open (truncated output).
    while out and out[-1] == ",":
        out.pop()
    if last == "colon":
        out.append("null")
    while stack:
        out.append(_CLOSERS[stack.pop()])
    return text[start:], "".join(out), False


def _number(token: str) -> str | None:
    """Normalise number spellings JSON rejects (``+1``, ``.5``, ``1.``, ``0x1f``)."""
    try:
        value: float | int = (
            int(token, 0) if token.lower().startswith(("0x", "0o", "0b")) else float(token)
        )
    except ValueError:
        return None
    if isinstance(value, float) and value != value:  # NaN spelled oddly
        return "NaN"
    if (
        isinstance(value, float)
        and value.is_integer()
        and "." not in token
        and "e" not in token.lower()
    ):
        value = int(value)
    return json.dumps(value)


def _from_python(value: Any) -> Any:
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_from_python(v) for v in value]
    if isinstance(value, dict):
        return {k: _from_python(v) for k, v in value.items()}
    return value


def _try_json(text: str) -> tuple[bool, Any]:
    try:
        return True, json.loads(text)
    except (ValueError, RecursionError):
        return False, None


def _bodies(text: str) -> list[str]:
    """The places to look for JSON: fenced blocks first, then the whole text."""
    bodies = []
    for match in _FENCE.finditer(text):
        body = match.group(2).strip()
        if body:
            bodies.append(body)
    bodies.append(text)
    return bodies


def parse_json_lenient(text: str) -> Any:
    """Parse JSON from LLM output, repairing the usual small-model mistakes.

    Tries, in order: the whole text; the body of a Markdown code fence; then
    the first bracketed ``{...}`` or ``[...]`` span (string-aware, so braces
    inside strings do not end it), first as is, then repaired, then through
    ``ast.literal_eval``. Repairs cover trailing and missing commas, single and
    typographic quotes, Python literals (``True``, ``False``, ``None``),
    unquoted keys, ``//`` comments, raw newlines inside strings and output cut
    off before its closing brackets. As a last resort single bare words are
    taken as strings (``{"answer": yes}``).

    Args:
        text: The raw model output.

    Returns:
        The parsed value (usually a ``dict`` or ``list``).

    Raises:
        LLMOutputError: If no JSON value can be recovered.
    """
    if not isinstance(text, str):
        raise LLMOutputError(f"expected model output as str, got {type(text).__name__}")
    stripped = text.strip().lstrip("\ufeff")
    if not stripped:
        raise LLMOutputError("model output is empty", raw=text)
    ok, value = _try_json(stripped)
    if ok:
        return value
    for body in _bodies(stripped):
        ok, value = _try_json(body)
        if ok:
            return value
        starts = [m.start() for m in re.finditer(r"[\[{]", body)][:_MAX_STARTS]
        # Passes from strict to loose, so a looser repair never wins over a
        # stricter reading of a later span.
        for loose in (False, True):
            for start in starts:
                raw, repaired, balanced = _scan(body, start, quote_bare_values=loose)
                if not loose:
                    ok, value = _try_json(raw)
                    if ok:
                        return value
                # Closing a cut-off span is trusted only when the strict reading
                # recovers some content; "{{{" or "[some words" are not JSON.
                if balanced or not loose:
                    ok, value = _try_json(repaired)
                    if ok and (balanced or value):
                        return value
                if not loose:
                    try:
                        value = ast.literal_eval(raw.strip())
                    except Exception:
                        continue
                    if isinstance(value, (dict, list, tuple)):
                        return _from_python(value)
    raise LLMOutputError(f"no JSON found in model output: {_clip(stripped, 120)!r}", raw=text)


_LIST_MARKER = re.compile(
    r"""^(?:
        \(\s*\d+\s*\)\s*           # (2) foo
      | \[\s*\d+\s*\]\s*           # [2] foo
      | \d+\s*[.):\]](?:\s+|\Z)   # 1. foo   1) foo   1: foo   1] foo
      | [-*+\u2022\u2013](?:\s+|\Z)  # - foo   * foo   + foo   bullet   en dash
    )""",
    re.VERBOSE,
)
_WRAPPED = re.compile(r"^\[(.+)\]$")
_ITEM_WRAPPERS = (('"', '"'), ("'", "'"), ("\u201c", "\u201d"), ("**", "**"), ("`", "`"))


def parse_numbered_lines(text: str) -> list[str]:
    """Split a numbered or bulleted list from LLM output into items.

    Recognises ``1. foo``, ``1) foo``, ``(2) foo``, ``- foo``, ``* foo``,
    ``\u2022 foo`` and ``[foo]``. If any line carries such a marker, unmarked
    lines (a preamble such as "Here are the questions:") are dropped;
    otherwise every non-empty line is an item. Items are stripped, and quotes,
    backticks or ``**`` around a whole item are removed.

    Args:
        text: The raw model output.

    Returns:
        The items in order; empty items are dropped.
    """
    lines: list[tuple[str, bool]] = []
    for line in (text or "").splitlines():
        line = line.strip()
        if not line:
            continue
        marker = _LIST_MARKER.match(line)
        wrapped = _WRAPPED.match(line)
        if marker:
            item, is_marked = line[marker.end() :], True
        elif wrapped:
            item, is_marked = wrapped.group(1), True
        else:
            item, is_marked = line, False
        item = _unwrap(item.strip())
        if item:
            lines.append((item, is_marked))
    if any(is_marked for _, is_marked in lines):
        return [item for item, is_marked in lines if is_marked]
    return [item for item, _ in lines]


def _unwrap(item: str) -> str:
    """Remove one pair of quotes / emphasis around a whole item."""
    for left, right in _ITEM_WRAPPERS:
        if len(item) > len(left) + len(right) and item.startswith(left) and item.endswith(right):
            return item[len(left) : -len(right)].strip()
    return item


def _clip(text: str, limit: int = 300) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."


# --------------------------------------------------------------------------- structured LLM

_REPAIR_TEMPLATE = (
    "\n\nYour previous reply could not be used ({error}). It began:\n"
    "{previous}\n"
    "Answer the request above again, this time with valid JSON of the requested "
    "shape only: no explanation and no code fences."
)

_SHAPE_ERRORS = (ValueError, TypeError, KeyError, IndexError)


class StructuredLLM:
    """A LlamaIndex ``LLM`` with caching, retries, bounded concurrency and JSON parsing.

    Args:
        llm: Any LlamaIndex ``LLM``. Calls go through ``llm.acomplete``.
        cache: A response cache; ``None`` disables caching.
        retry: The retry policy; defaults to ``RetryPolicy()``.
        max_concurrency: The most LLM calls in flight at once per event loop.
        meter: A usage meter to update; pass a shared one to total several
            wrappers. A fresh meter is created when omitted.
        params: Extra keyword arguments sent with every call. They are part of
            the cache key, like per-call keyword arguments.

    Attributes:
        llm: The wrapped LLM.
        cache: The response cache, or ``None``.
        retry: The retry policy.
        max_concurrency: The concurrency bound.
        meter: The usage meter.
        params: Keyword arguments sent with every call.
        repair_template: Text appended to a prompt when its answer could not be
            parsed; ``{error}`` and ``{previous}`` are filled in.
    """

    def __init__(
        self,
        llm: Any,
        cache: LLMCache | None = None,
        retry: RetryPolicy | None = None,
        max_concurrency: int = 4,
        meter: UsageMeter | None = None,
        params: dict[str, Any] | None = None,
    ) -> None:
        if llm is None:
            raise ValueError("StructuredLLM needs an LLM; pass llm= or resolve Settings.llm first")
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be >= 1, got {max_concurrency}")
        self.llm = llm
        self.cache = cache
        self.retry = retry if retry is not None else RetryPolicy()
        self.max_concurrency = int(max_concurrency)
        self.meter = meter if meter is not None else UsageMeter()
        self.params: dict[str, Any] = dict(params or {})
        self.repair_template = _REPAIR_TEMPLATE
        self._semaphores: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore]
        self._semaphores = weakref.WeakKeyDictionary()
        self._sem_lock = threading.Lock()

    def __repr__(self) -> str:
        return (
            f"StructuredLLM(llm={type(self.llm).__name__}, cache={self.cache!r}, "
            f"max_concurrency={self.max_concurrency})"
        )

    # ----------------------------------------------------------------- helpers

    @property
    def fingerprint(self) -> str:
        """The model identity used in cache keys (see ``llm_fingerprint``)."""
        return llm_fingerprint(self.llm)

    def cache_key(self, prompt: str, **kwargs: Any) -> str:
        """Return the cache key a call with this prompt and these kwargs would use.

        Args:
            prompt: The prompt.
            **kwargs: Per-call keyword arguments.

        Returns:
            The hex key.
        """
        return cache_key(self.fingerprint, prompt, {**self.params, **kwargs})

    def _semaphore(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        with self._sem_lock:
            sem = self._semaphores.get(loop)
            if sem is None:
                sem = asyncio.Semaphore(self.max_concurrency)
                self._semaphores[loop] = sem
            return sem

    def _record_usage(self, prompt: str, response: Any, text: str) -> None:
        prompt_tokens, completion_tokens = reported_usage(response)
        if prompt_tokens is None:
            prompt_tokens = estimate_tokens(prompt)
        if completion_tokens is None:
            completion_tokens = estimate_tokens(text)
        self.meter.add(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)

    async def _call_llm(self, prompt: str, kwargs: dict[str, Any]) -> str:
        """One logical call: attempts with back-off, each under the semaphore and timeout."""
        policy = self.retry
        sem = self._semaphore()
        attempt = 0
        while True:
            attempt += 1
            try:
                async with sem:
                    self.meter.add(calls=1)
                    call = self.llm.acomplete(prompt, **kwargs)
                    if policy.timeout is not None:
                        response = await asyncio.wait_for(call, policy.timeout)
                    else:
                        response = await call
            except Exception as exc:
                retryable = policy.should_retry(exc)
                if not retryable or attempt >= policy.max_attempts:
                    self.meter.add(failures=1)
                    logger.error(
                        "LLM call failed for good after %d attempt(s): %s: %s",
                        attempt,
                        type(exc).__name__,
                        _describe(exc, policy),
                    )
                    raise
                delay = policy.backoff(attempt)
                self.meter.add(retries=1)
                logger.warning(
                    "LLM call attempt %d/%d failed (%s: %s); retrying in %.2fs",
                    attempt,
                    policy.max_attempts,
                    type(exc).__name__,
                    _describe(exc, policy),
                    delay,
                )
                if delay > 0:
                    await asyncio.sleep(delay)
                continue
            text = getattr(response, "text", None)
            text = "" if text is None else str(text)
            self._record_usage(prompt, response, text)
            return text

    async def _complete(
        self,
        prompt: str,
        kwargs: dict[str, Any],
        *,
        read_cache: bool,
        write_cache: bool,
        accept: Callable[[str], bool] | None = None,
    ) -> tuple[str, bool]:
        """Return ``(text, from_cache)``; only answers ``accept`` approves are cached or reused."""
        call_kwargs = {**self.params, **kwargs}
        key = None
        if self.cache is not None:
            key = cache_key(self.fingerprint, prompt, call_kwargs)
            if read_cache:
                cached = self.cache.get(key)
                if cached is not None and (accept is None or accept(cached)):
                    self.meter.add(cache_hits=1)
                    return cached, True
        text = await self._call_llm(prompt, call_kwargs)
        if key is not None and write_cache and (accept is None or accept(text)):
            self.cache.put(key, text)  # type: ignore[union-attr]
        return text, False

    # ----------------------------------------------------------------- completion

    async def acomplete(
        self, prompt: str, *, accept: Callable[[str], bool] | None = None, **kwargs: Any
    ) -> str:
        """Complete a prompt, from the cache when possible.

        Args:
            prompt: The prompt.
            accept: Optional check of an answer (e.g. "it parses"). Answers it
                rejects are returned but never cached, and a cached answer it
                rejects is asked again, so a junk answer from a failing model is
                not replayed from the cache by a later, healthy run.
            **kwargs: Passed to ``llm.acomplete`` and part of the cache key.

        Returns:
            The completion text.

        Raises:
            Exception: The last error once retries are exhausted (counted in
                ``meter.failures``).
        """
        text, _ = await self._complete(
            prompt, kwargs, read_cache=True, write_cache=True, accept=accept
        )
        return text

    def complete(
        self, prompt: str, *, accept: Callable[[str], bool] | None = None, **kwargs: Any
    ) -> str:
        """Synchronous [`acomplete`][llama_index_graphrag_ext.core.llm.StructuredLLM.acomplete].

        Works with or without a running event loop (see ``run_sync``).
        """
        return run_sync(lambda: self.acomplete(prompt, accept=accept, **kwargs))

    # ----------------------------------------------------------------- JSON

    async def ajson(
        self,
        prompt: str,
        *,
        validate: Callable[[Any], Any] | None = None,
        repair_attempts: int = 2,
        **kwargs: Any,
    ) -> Any:
        """Complete a prompt and parse the answer as JSON, re-asking on failure.

        The answer is parsed with [`parse_json_lenient`][llama_index_graphrag_ext.core.llm.parse_json_lenient]
        and passed to ``validate``, which may return a transformed value or
        raise ``ValueError`` (also ``TypeError``, ``KeyError`` or ``IndexError``)
        to reject its shape. On failure the prompt is sent again with a short
        repair note appended. Only answers that pass are written to the cache,
        under the original prompt, so a later run gets the good answer at once;
        a cached answer that no longer validates is ignored and replaced.

        Args:
            prompt: The prompt; it should describe the JSON shape wanted.
            validate: Optional check / transform of the parsed value.
            repair_attempts: How many re-asks after the first answer (>= 0).
            **kwargs: Passed to ``llm.acomplete`` and part of the cache key.

        Returns:
            The parsed (and validated) value.

        Raises:
            LLMOutputError: If no answer could be parsed and validated (counted
                in ``meter.parse_failures``); ``raw`` holds the last answer.
        """
        if repair_attempts < 0:
            raise ValueError(f"repair_attempts must be >= 0, got {repair_attempts}")
        current = prompt
        last_text = ""
        last_error: BaseException | None = None
        for attempt in range(repair_attempts + 1):
            text, from_cache = await self._complete(
                current, kwargs, read_cache=attempt == 0, write_cache=False
            )
            try:
                value = parse_json_lenient(text)
                if validate is not None:
                    value = validate(value)
            except _SHAPE_ERRORS as exc:
                last_text, last_error = text, exc
                logger.debug(
                    "unusable JSON answer (attempt %d/%d, %s): %s",
                    attempt + 1,
                    repair_attempts + 1,
                    type(exc).__name__,
                    _clip(text, 200),
                )
                current = prompt + self.repair_template.format(
                    error=_clip(f"{type(exc).__name__}: {exc}", 160),
                    previous=_clip(text, 300),
                )
                continue
            if self.cache is not None and not from_cache:
                self.cache.put(self.cache_key(prompt, **kwargs), text)
            return value
        self.meter.add(parse_failures=1)
        logger.warning(
            "LLM output stayed unusable after %d attempt(s) (%s): %s",
            repair_attempts + 1,
            type(last_error).__name__,
            _clip(last_text, 200),
        )
        raise LLMOutputError(
            f"LLM output could not be parsed after {repair_attempts + 1} attempt(s): {last_error}",
            raw=last_text,
        ) from last_error

    def json(
        self,
        prompt: str,
        *,
        validate: Callable[[Any], Any] | None = None,
        repair_attempts: int = 2,
        **kwargs: Any,
    ) -> Any:
        """Synchronous [`ajson`][llama_index_graphrag_ext.core.llm.StructuredLLM.ajson]."""
        return run_sync(
            lambda: self.ajson(prompt, validate=validate, repair_attempts=repair_attempts, **kwargs)
        )

    # ----------------------------------------------------------------- fan-out

    async def amap(
        self,
        prompts: Sequence[str],
        fn: Callable[[str], Awaitable[Any]] | None = None,
        *,
        return_exceptions: bool = True,
        show_progress: bool = False,
        desc: str = "LLM",
    ) -> list[Any]:
        """Apply an async function to many prompts concurrently, keeping order.

        At most ``max_concurrency`` items are processed at once, and the LLM
        calls inside them share the same bound.

        Args:
            prompts: The inputs (usually prompts).
            fn: An async function of one input; defaults to ``self.acomplete``.
                Use ``lambda p: self.ajson(p, validate=...)`` for JSON.
            return_exceptions: If ``True``, a failed item's exception object is
                put in its slot (callers count and log them); if ``False`` the
                first failure cancels the rest and is raised.
            show_progress: Show a tqdm progress bar.
            desc: The progress bar label.

        Returns:
            One result (or exception) per input, in input order.
        """
        items = list(prompts)
        func = fn if fn is not None else self.acomplete
        results: list[Any] = [None] * len(items)
        if not items:
            return results
        bar = None
        if show_progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=len(items), desc=desc)
        pending = iter(enumerate(items))
        failed = 0

        async def worker() -> None:
            nonlocal failed
            for index, item in pending:
                try:
                    results[index] = await func(item)
                except Exception as exc:
                    if not return_exceptions:
                        raise
                    results[index] = exc
                    failed += 1
                finally:
                    if bar is not None:
                        bar.update(1)

        workers = [
            asyncio.ensure_future(worker()) for _ in range(min(self.max_concurrency, len(items)))
        ]
        try:
            await asyncio.gather(*workers)
        except BaseException:
            for task in workers:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            raise
        finally:
            if bar is not None:
                bar.close()
        if failed:
            logger.warning("%s: %d of %d items failed", desc, failed, len(items))
        return results

    def map(
        self,
        prompts: Sequence[str],
        fn: Callable[[str], Awaitable[Any]] | None = None,
        *,
        return_exceptions: bool = True,
        show_progress: bool = False,
        desc: str = "LLM",
    ) -> list[Any]:
        """Synchronous [`amap`][llama_index_graphrag_ext.core.llm.StructuredLLM.amap]; ``fn`` must still be async."""
        return run_sync(
            lambda: self.amap(
                prompts,
                fn,
                return_exceptions=return_exceptions,
                show_progress=show_progress,
                desc=desc,
            )
        )


def _describe(exc: BaseException, policy: RetryPolicy) -> str:
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)) and not str(exc):
        return f"no answer within {policy.timeout}s"
    return _clip(str(exc), 200)
