"""The wire's vocabulary: requests as parsed, replies, faults, records, token counts.

Shared by ``WireServer`` and the
answer composer; tokens are tiktoken's ``cl100k_base``, as OpenAI counts ``usage``.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "CHAT_PATH",
    "COMPLETIONS_PATH",
    "PATHS",
    "Fault",
    "WireRecord",
    "WireReply",
    "WireRequest",
    "count_tokens",
    "encoding",
    "ERRORS",
    "parse_request",
]

CHAT_PATH = "/v1/chat/completions"
COMPLETIONS_PATH = "/v1/completions"
PATHS = (CHAT_PATH, COMPLETIONS_PATH)


@dataclass
class WireRequest:
    """One completion request, as the server parsed it.

    ``stream``, ``tools``, ``tool_choice`` and ``response_format`` are the body's fields
    (``None`` when absent); ``headers`` has lower-case names.

    Attributes:
        path: ``"/v1/chat/completions"`` or ``"/v1/completions"``.
        body: The parsed JSON body.
        prompt: What the model reads: the chat messages' text contents joined with
            ``"\\n"`` (empty ones skipped), or ``body["prompt"]`` for completions.
        messages: The chat messages (``[]`` for completions).
        max_tokens: The body's ``max_tokens``, else its ``max_completion_tokens``.
        number: 1-based arrival order (since the last :meth:`WireServer.reset`).
    """

    path: str
    body: dict
    prompt: str
    messages: list[dict]
    max_tokens: int | None
    stream: bool
    tools: list[dict] | None
    tool_choice: Any
    response_format: dict | None
    headers: dict[str, str]
    number: int


@dataclass
class WireReply:
    """What the "model" answers to one request.

    Attributes:
        text: The assistant's text as the model would write it.
        arguments: A structured payload: a tool call's arguments when the request has
            ``tools``, the JSON content when its ``response_format`` is ``json_schema``
            or ``json_object``; ignored otherwise.
        task: A label for the per-task counts of :meth:`WireServer.stats`.
        finish_reason: Normally ``None`` (the server decides); set it to force one,
            e.g. ``"length"`` to fake a truncation. A real cut always says ``"length"``.
        reasoning: Reasoning sent apart from the content, as vLLM with a reasoning parser
            sends it (in ``WireServer(reasoning_field=...)``, streamed before the
            content). It comes first: it counts toward ``max_tokens`` and ``usage``, and
            a limit that ends inside it leaves ``content`` null (chat only: a
            ``/v1/completions`` answer has no field for it, so it is counted, not sent).
        tool_calls: Several tool calls in one reply (instead of ``arguments``), each
            element one call's arguments, all naming the same tool; a cut ends inside
            one call and drops the rest.
        preface: Content the model writes before its answer proper, whatever the
            request: in front of the text or of the JSON text, and as the content beside
            tool calls (where Qwen's hermes parser leaves a ``<think>`` block). It
            counts toward ``max_tokens`` after the reasoning.
    """

    text: str = ""
    arguments: dict | list | None = None
    task: str | None = None
    finish_reason: str | None = None
    reasoning: str | None = None
    tool_calls: list[dict | list] | None = None
    preface: str = ""


@dataclass
class Fault:
    """A misbehaviour of the server for the requests it matches.

    Attributes:
        status: Answer with this HTTP error and an OpenAI-style body (0: answer normally).
        retry_after: Seconds sent in the ``Retry-After`` header of that error.
        delay: Sleep this long (asynchronously) before answering, e.g. past a client timeout.
        cut_at: Cut the completion after this many tokens (``finish_reason`` ``"length"``).
        match: Which requests it applies to (``None``: any).
        times: How many matching requests it applies to (``None``: no limit).
        message: The error message (default: what OpenAI says for that status).
        reset_after: Close the connection after this many SSE chunks of a streamed
            answer: the client reads an incomplete stream. ``0`` closes it before
            anything is sent, the responder not called, streamed or not (a
            non-streamed answer is one piece: any other number lets it through).
    """

    status: int = 0
    retry_after: float | None = None
    delay: float = 0.0
    cut_at: int | None = None
    match: Callable[[WireRequest], bool] | None = None
    times: int | None = 1
    message: str | None = None
    reset_after: int | None = None


@dataclass
class WireRecord:
    """What happened to one request, in :attr:`WireServer.log`.

    Attributes:
        request: The request.
        status: The HTTP status answered: ``None`` while in flight, 499 when the
            client had hung up before the answer (e.g. it timed out during a delay),
            0 when a fault's ``reset_after=0`` closed the connection unanswered.
        text: The completion sent (content, or the tool calls' arguments one per
            line); all of it, also when ``reset_after`` broke the stream partway.
        usage: The ``usage`` sent (answered requests only).
        finish_reason: The finish reason sent.
        task: The responder's label.
        peer: The client's ``host:port``: one per TCP connection.
        reasoning: The reasoning sent apart from the content (``None``: none).
    """

    request: WireRequest
    status: int | None = None
    text: str | None = None
    usage: dict | None = None
    finish_reason: str | None = None
    task: str | None = None
    peer: str | None = None
    reasoning: str | None = None
    _generation: int = field(default=0, repr=False)


# (type, code, message) of OpenAI's error bodies, by status.
ERRORS: dict[int, tuple[str, str | None, str]] = {
    400: ("invalid_request_error", None, "Invalid request."),
    401: ("invalid_request_error", "invalid_api_key", "Incorrect API key provided"),
    403: ("permission_error", None, "You are not allowed to sample from this model."),
    404: ("invalid_request_error", "model_not_found", "The model does not exist."),
    429: ("requests", "rate_limit_exceeded", "Rate limit reached for requests."),
    500: ("server_error", None, "The server had an error while processing your request."),
    503: ("server_error", None, "The engine is currently overloaded, please try again later."),
}

_ENCODING: Any = None
_ENCODING_LOCK = threading.Lock()


def encoding() -> Any:
    """tiktoken's ``cl100k_base`` (loaded once, offline, from llama-index-core's bundled copy)."""
    global _ENCODING
    with _ENCODING_LOCK:
        if _ENCODING is None:
            import llama_index.core
            import tiktoken

            # tiktoken downloads its files unless TIKTOKEN_CACHE_DIR holds them, and
            # llama-index-core ships cl100k_base: point there for the load only.
            here = os.path.dirname(llama_index.core.__file__)
            bundled = os.path.join(here, "_static", "tiktoken_cache")
            previous = os.environ.get("TIKTOKEN_CACHE_DIR")
            if previous is None and os.path.isdir(bundled):
                os.environ["TIKTOKEN_CACHE_DIR"] = bundled
            try:
                _ENCODING = tiktoken.get_encoding("cl100k_base")
            finally:
                if previous is None:
                    os.environ.pop("TIKTOKEN_CACHE_DIR", None)
        return _ENCODING


def count_tokens(text: str) -> int:
    """Number of ``cl100k_base`` tokens in ``text``, as the server counts them in ``usage``."""
    return len(encoding().encode(text, disallowed_special=()))


def _text_of(message: dict) -> str:
    content = message.get("content")
    if isinstance(content, list):  # content parts: keep the text ones
        parts = [p for p in content if isinstance(p, dict) and "text" in p]
        return "\n".join(str(p["text"]) for p in parts)
    return content if isinstance(content, str) else ""


def parse_request(path: str, body: dict, headers: dict[str, str], number: int) -> WireRequest:
    messages: list[dict] = []
    if path == CHAT_PATH:
        raw = body.get("messages")
        messages = [m for m in raw if isinstance(m, dict)] if isinstance(raw, list) else []
        prompt = "\n".join(t for t in map(_text_of, messages) if t)
    else:
        raw = body.get("prompt", "")
        prompt = "\n".join(map(str, raw)) if isinstance(raw, list) else str(raw)
    max_tokens = body.get("max_tokens")
    if max_tokens is None:
        max_tokens = body.get("max_completion_tokens")
    tools, response_format = body.get("tools"), body.get("response_format")
    return WireRequest(
        path=path,
        body=body,
        prompt=prompt,
        messages=messages,
        max_tokens=max_tokens if isinstance(max_tokens, int) else None,
        stream=bool(body.get("stream")),
        tools=tools if isinstance(tools, list) and tools else None,
        tool_choice=body.get("tool_choice"),
        response_format=response_format if isinstance(response_format, dict) else None,
        headers=headers,
        number=number,
    )
