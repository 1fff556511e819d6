"""A real OpenAI-compatible HTTP server on loopback, for testing LLM clients over a real wire.

[`WireServer`][llama_index_graphrag_ext.testing.wire.WireServer] runs uvicorn in a daemon
thread of the test process and answers ``/v1/chat/completions``, ``/v1/completions`` and
``/v1/models`` as OpenAI-compatible servers do (JSON, Server-Sent Events, ``usage`` in
tiktoken ``cl100k_base`` tokens, ``max_tokens`` cuts, tool calls, ``response_format``,
OpenAI-style errors), so a client's HTTP, pooling, retries, timeouts and SSE parsing all
really run. A *responder* decides what the "model" says; [`Fault`][llama_index_graphrag_ext.testing.wire.Fault]s
make chosen requests fail, stall or get cut.

Example:
    ```python
    with WireServer(lambda req: "Paris") as server:
        llm = OpenAILike(model="m", api_base=server.base_url, api_key=server.api_key)
        assert llm.complete("Capital of France?").text == "Paris"
    ```
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import functools
import inspect
import json
import os
import re
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

__all__ = ["Fault", "WireRecord", "WireReply", "WireRequest", "WireServer", "count_tokens"]

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
    """

    text: str = ""
    arguments: dict | list | None = None
    task: str | None = None
    finish_reason: str | None = None


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
    """

    status: int = 0
    retry_after: float | None = None
    delay: float = 0.0
    cut_at: int | None = None
    match: Callable[[WireRequest], bool] | None = None
    times: int | None = 1
    message: str | None = None


@dataclass
class WireRecord:
    """What happened to one request, in :attr:`WireServer.log`.

    Attributes:
        request: The request.
        status: The HTTP status answered: ``None`` while in flight, 499 when the
            client had hung up before the answer (e.g. it timed out during a delay).
        text: The completion actually sent (content, or a tool call's arguments).
        usage: The ``usage`` sent (answered requests only).
        finish_reason: The finish reason sent.
        task: The responder's label.
        peer: The client's ``host:port``: one per TCP connection.
    """

    request: WireRequest
    status: int | None = None
    text: str | None = None
    usage: dict | None = None
    finish_reason: str | None = None
    task: str | None = None
    peer: str | None = None
    _generation: int = field(default=0, repr=False)


# (type, code, message) of OpenAI's error bodies, by status.
_ERRORS: dict[int, tuple[str, str | None, str]] = {
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


def _parse(path: str, body: dict, headers: dict[str, str], number: int) -> WireRequest:
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


def _tool_name(request: WireRequest) -> str:
    """The tool a tool call names: the one ``tool_choice`` forces, else the first tool."""
    choice = request.tool_choice
    if isinstance(choice, dict):  # {"type": "function", "function": {"name": ...}}
        name = (choice.get("function") or {}).get("name") or choice.get("name")
        if name:
            return str(name)
    first = request.tools[0] if request.tools else {}
    return (first.get("function") or {}).get("name") or first.get("name") or "function"


def _pieces(text: str) -> list[str]:
    """Word-sized stream pieces whose concatenation is exactly ``text``."""
    return re.findall(r"\S+\s*|\s+", text)


async def _sleep(seconds: float, wake: asyncio.Event | None) -> None:
    """Sleep without blocking the loop; setting ``wake`` (on stop) cuts it short."""
    if seconds > 0:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for((wake or asyncio.Event()).wait(), seconds)


@dataclass
class _Answer:
    text: str
    finish_reason: str
    usage: dict
    tool: tuple[str, str] | None  # (call id, function name) when answering with a tool call
    task: str | None


class _UvicornServer(uvicorn.Server):
    """uvicorn's server, stopped by ``wake`` at once rather than on its next 0.1 s tick.

    (~0.1 s per stop, which adds up over a suite that starts a server per test.)
    """

    wake: asyncio.Event | None = None

    async def main_loop(self) -> None:
        counter = 0
        while not await self.on_tick(counter):  # on_tick also refreshes the Date header
            counter = (counter + 1) % 864000
            await _sleep(0.1, self.wake)


class WireServer:
    """An OpenAI-compatible server on ``127.0.0.1``, run by uvicorn in a daemon thread.

    Args:
        responder: Called (in a worker thread, so it may block) with each
            [`WireRequest`][llama_index_graphrag_ext.testing.wire.WireRequest]; returns
            a [`WireReply`][llama_index_graphrag_ext.testing.wire.WireReply], a string
            (the text) or a dict/list (the ``arguments``). May be ``async``. Settable at
            any time as :attr:`responder`. Default: answers ``"OK"``. If it raises, the
            client gets a 500 and the exception is kept in :attr:`errors`.
        api_key: The key clients must send as ``Authorization: Bearer <key>``.
        model: The model ``/v1/models`` lists (replies name the model requested).
        stream_delay: Seconds between streamed chunks.

    Attributes:
        base_url: ``"http://127.0.0.1:PORT/v1"`` once started (``port`` holds PORT).
        log: A [`WireRecord`][llama_index_graphrag_ext.testing.wire.WireRecord] per
            completion request, in arrival order.
        errors: The exceptions the responder raised.
    """

    def __init__(
        self,
        responder: Callable[[WireRequest], Any] | None = None,
        *,
        api_key: str = "sk-wire",
        model: str = "wire-model",
        stream_delay: float = 0.0,
    ) -> None:
        self.responder = responder or (lambda request: WireReply(text="OK"))
        self.api_key, self.model, self.stream_delay = api_key, model, stream_delay
        self.base_url, self.port = "", None
        self.log: list[WireRecord] = []
        self.errors: list[BaseException] = []
        self._lock = threading.Lock()
        self._faults: list[list[Any]] = []  # [fault, uses left (None: no limit)]
        self._generation = 0  # bumped by reset(): requests from before it are not counted
        self._clear_counts()
        self._server: _UvicornServer | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None  # set by stop(): ends sleeps at once
        self._crash: BaseException | None = None
        routes = [
            Route(p, functools.partial(self._handle, path=p), methods=["POST"]) for p in PATHS
        ]
        self.app = Starlette(routes=[*routes, Route("/v1/models", self._models)])

    # ---- life cycle -------------------------------------------------------------------

    def start(self, timeout: float = 10.0) -> WireServer:
        """Serve on a free loopback port in a daemon thread; return once it accepts connections.

        Raises:
            RuntimeError: The server failed, or did not start within ``timeout`` seconds.
        """
        if self._server is not None:
            return self
        encoding()  # load the tokenizer now rather than in the first request
        config = uvicorn.Config(
            self.app,
            host="127.0.0.1",
            port=0,  # the OS picks a free port; read back from the socket below
            log_level="warning",
            lifespan="off",
            access_log=False,
            timeout_graceful_shutdown=3,  # bounds a stop that waits for a stuck request
        )
        server = self._server = _UvicornServer(config)
        self._crash = None
        self._thread = threading.Thread(target=self._run, args=(server,), daemon=True)
        self._thread.name = "wire-server"
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not server.started:
            if not self._thread.is_alive():
                self._server = None
                raise RuntimeError(f"the wire server failed to start: {self._crash!r}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the wire server did not start within {timeout} s")
            time.sleep(0.002)
        self.port = server.servers[0].sockets[0].getsockname()[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        return self

    def _run(self, server: _UvicornServer) -> None:
        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            self._wake = server.wake = asyncio.Event()
            await server.serve()

        try:
            asyncio.run(main())  # this thread's own event loop
        except BaseException as exc:  # uvicorn calls sys.exit() when it cannot bind
            self._crash = exc

    def stop(self, timeout: float = 10.0) -> None:
        """Stop serving and join the thread; requests sleeping in a delay are answered at once."""
        server, thread, loop, wake = self._server, self._thread, self._loop, self._wake
        if server is None:
            return
        server.should_exit = True
        if loop is not None and wake is not None:
            with contextlib.suppress(RuntimeError):  # the loop may have closed already
                loop.call_soon_threadsafe(wake.set)
        if thread is not None:
            thread.join(timeout)
        self._server = self._thread = self._loop = self._wake = None

    def __enter__(self) -> WireServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- faults, counts, log ----------------------------------------------------------

    def inject(self, *faults: Fault) -> None:
        """Queue faults; a request takes the first one not used up whose ``match`` accepts it."""
        with self._lock:
            self._faults.extend([replace(f), f.times] for f in faults)

    def stats(self) -> dict:
        """Counts since the last :meth:`reset`.

        Returns:
            ``requests`` (completion requests, counted on arrival), ``by_status`` (counted
            once answered; 499: the client had hung up), ``answered`` (status 200),
            ``prompt_tokens`` and ``completion_tokens`` (of answered requests),
            ``by_task`` (``{task: {"requests", "prompt_tokens", "completion_tokens"}}``),
            ``cut`` (answers with ``finish_reason`` ``"length"``) and ``connections``
            (distinct client TCP connections).
        """
        with self._lock:
            out = copy.deepcopy(self._counts)
        out["connections"] = len(out.pop("peers"))
        return out

    def usage(self, tasks: set[str] | None = None) -> tuple[int, int, int]:
        """``(requests, prompt_tokens, completion_tokens)`` counted so far (of ``tasks`` only)."""
        stats = self.stats()
        if tasks is None:
            return stats["requests"], stats["prompt_tokens"], stats["completion_tokens"]
        rows = [row for task, row in stats["by_task"].items() if task in tasks]
        return (
            sum(r["requests"] for r in rows),
            sum(r["prompt_tokens"] for r in rows),
            sum(r["completion_tokens"] for r in rows),
        )

    def reset(self) -> None:
        """Clear counts, log, errors and pending faults."""
        with self._lock:
            self._generation += 1
            self._clear_counts()
            self.log, self.errors, self._faults = [], [], []

    def _clear_counts(self) -> None:
        self._number = 0
        self._counts: dict[str, Any] = {
            "requests": 0,
            "by_status": {},
            "answered": 0,
            "prompt_tokens": 0,
            "completion_tokens": 0,
            "by_task": {},
            "cut": 0,
            "peers": set(),  # client host:port pairs, reported as a count of connections
        }

    def _arrive(self, path: str, body: dict, headers: dict, peer: str | None) -> WireRecord:
        with self._lock:
            self._number += 1
            record = WireRecord(_parse(path, body, headers, self._number), peer=peer)
            record._generation = self._generation
            self.log.append(record)
            self._counts["requests"] += 1
            self._counts["peers"].add(peer)
            return record

    def _take_fault(self, request: WireRequest) -> Fault | None:
        with self._lock:
            for entry in self._faults:
                fault, left = entry
                if (left is None or left > 0) and (fault.match is None or fault.match(request)):
                    entry[1] = None if left is None else left - 1
                    return fault
        return None

    def _finish(self, record: WireRecord, status: int, answer: _Answer | None = None) -> None:
        with self._lock:
            record.status = status
            if answer is not None:
                record.text, record.usage = answer.text, answer.usage
                record.finish_reason, record.task = answer.finish_reason, answer.task
            if record._generation != self._generation:
                return  # it arrived before a reset()
            counts = self._counts
            counts["by_status"][status] = counts["by_status"].get(status, 0) + 1
            if answer is None:
                return
            counts["answered"] += 1
            counts["cut"] += answer.finish_reason == "length"
            zero = {"requests": 0, "prompt_tokens": 0, "completion_tokens": 0}
            task = counts["by_task"].setdefault(answer.task, zero) if answer.task else zero
            task["requests"] += 1
            for key in ("prompt_tokens", "completion_tokens"):
                counts[key] += answer.usage[key]
                task[key] += answer.usage[key]

    # ---- the HTTP application ---------------------------------------------------------

    async def _models(self, request: Request) -> Response:
        if not self._authorized(request.headers):
            return self._error(401)
        entry = {"id": self.model, "object": "model", "created": 0, "owned_by": "wire"}
        return JSONResponse({"object": "list", "data": [entry]})

    def _authorized(self, headers: Any) -> bool:
        return headers.get("authorization", "") == f"Bearer {self.api_key}"

    @staticmethod
    def _error(status: int, message: str | None = None, retry_after: float | None = None):
        kind = "server_error" if status >= 500 else "invalid_request_error"
        kind, code, default = _ERRORS.get(status, (kind, None, "Error."))
        error = {"message": message or default, "type": kind, "param": None, "code": code}
        headers = {}
        if retry_after is not None:  # servers write whole seconds as an integer
            seconds = float(retry_after)
            headers["retry-after"] = str(int(seconds)) if seconds.is_integer() else str(seconds)
        return JSONResponse({"error": error}, status_code=status, headers=headers)

    async def _handle(self, request: Request, path: str) -> Response:
        raw = await request.body()
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        peer = f"{request.client.host}:{request.client.port}" if request.client else None
        headers = dict(request.headers)
        record = self._arrive(path, body if isinstance(body, dict) else {}, headers, peer)
        wreq = record.request

        def fail(status: int, message: str | None = None, retry_after: float | None = None):
            self._finish(record, status)
            return self._error(status, message, retry_after)

        # In the order real servers check: the key first, then the body.
        if not self._authorized(request.headers):
            return fail(401)
        if not isinstance(body, dict):
            return fail(400, "We could not parse the JSON body of your request.")
        if path == CHAT_PATH and not wreq.messages:
            return fail(400, "'messages' must be a non-empty array.")
        if path == COMPLETIONS_PATH and "prompt" not in body:
            return fail(400, "'prompt' is a required property.")

        fault = self._take_fault(wreq)
        if fault is not None and fault.delay > 0:
            await _sleep(fault.delay, self._wake)
            if await request.is_disconnected():  # the client timed out and hung up
                self._finish(record, 499)
                return Response(status_code=499)
        if fault is not None and fault.status:
            return fail(fault.status, fault.message, fault.retry_after)
        try:
            reply = await self._call_responder(wreq)
        except Exception as exc:  # a bug in the test's responder: a 500, and kept
            with self._lock:
                self.errors.append(exc)
            return fail(500, f"The responder raised {exc!r}")
        answer = self._compose(wreq, reply, fault.cut_at if fault else None)
        # Counted before sending: a client that has read the reply sees it in stats().
        self._finish(record, 200, answer)
        if wreq.stream:
            chunks = self._chunks(wreq, answer)
            return StreamingResponse(self._sse(chunks), media_type="text/event-stream")
        return JSONResponse(self._body(wreq, answer))

    async def _call_responder(self, request: WireRequest) -> WireReply:
        # In a worker thread: a responder that blocks does not stall other requests.
        result = await run_in_threadpool(self.responder, request)
        if inspect.isawaitable(result):  # an async responder: run its coroutine here
            result = await result
        if isinstance(result, str):
            return WireReply(text=result)
        if isinstance(result, (dict, list)):
            return WireReply(arguments=result)
        if not isinstance(result, WireReply):
            raise TypeError(f"the responder returned {type(result).__name__}, not a WireReply")
        return result

    # ---- composing answers ------------------------------------------------------------

    def _compose(self, request: WireRequest, reply: WireReply, cut_at: int | None) -> _Answer:
        fmt = (request.response_format or {}).get("type")
        structured = reply.arguments is not None
        calls = request.path == CHAT_PATH and request.tools and request.tool_choice != "none"
        tool = (f"call_{uuid.uuid4().hex[:24]}", _tool_name(request)) if calls else None
        if tool is not None and structured:
            text, finish = json.dumps(reply.arguments), "tool_calls"
        elif fmt in ("json_schema", "json_object") and structured:
            text, finish = json.dumps(reply.arguments), "stop"
        else:  # text, also when the request has tools but the reply no arguments
            text, finish, tool = reply.text, "stop", None
        finish = reply.finish_reason or finish

        # The prompt, plus the JSON of tools and schemas: real servers put those in
        # front of the model too, and bill them.
        prompt_tokens = count_tokens(request.prompt)
        if request.tools:
            prompt_tokens += count_tokens(json.dumps(request.tools))
        if fmt == "json_schema":
            prompt_tokens += count_tokens(json.dumps(request.response_format))

        # max_tokens (or a fault's cut) stops the model mid-text, as a real one stops.
        tokens = encoding().encode(text, disallowed_special=())
        limits = [n for n in (request.max_tokens, cut_at) if n is not None]
        if limits and len(tokens) > max(min(limits), 0):
            tokens = tokens[: max(min(limits), 0)]
            text, finish = encoding().decode(tokens), "length"
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": len(tokens)}
        usage["total_tokens"] = prompt_tokens + len(tokens)
        return _Answer(text=text, finish_reason=finish, usage=usage, tool=tool, task=reply.task)

    def _head(self, request: WireRequest, kind: str) -> dict:
        prefix = "chatcmpl" if request.path == CHAT_PATH else "cmpl"
        model = request.body.get("model") or self.model
        head = {"id": f"{prefix}-{uuid.uuid4().hex[:24]}", "object": kind}
        return {**head, "created": int(time.time()), "model": model, "system_fingerprint": None}

    def _body(self, request: WireRequest, answer: _Answer) -> dict:
        if request.path == COMPLETIONS_PATH:
            choice: dict[str, Any] = {"text": answer.text, "index": 0, "logprobs": None}
            head = self._head(request, "text_completion")
        else:
            message: dict[str, Any] = {"role": "assistant", "content": answer.text, "refusal": None}
            if answer.tool is not None:
                function = {"name": answer.tool[1], "arguments": answer.text}
                call = {"id": answer.tool[0], "type": "function", "function": function}
                message.update(content=None, tool_calls=[call])
            choice = {"index": 0, "message": message, "logprobs": None}
            head = self._head(request, "chat.completion")
        choice["finish_reason"] = answer.finish_reason
        return {**head, "choices": [choice], "usage": answer.usage}

    def _chunks(self, request: WireRequest, answer: _Answer) -> list[dict]:
        """The stream's chunks, all made up front (the reply is already decided)."""
        chat = request.path == CHAT_PATH
        head = self._head(request, "chat.completion.chunk" if chat else "text_completion")
        options = request.body.get("stream_options")
        with_usage = isinstance(options, dict) and bool(options.get("include_usage"))

        def chunk(payload: Any, finish: str | None = None) -> dict:
            choice = {"index": 0, "delta" if chat else "text": payload}
            out = {**head, "choices": [{**choice, "logprobs": None, "finish_reason": finish}]}
            if with_usage:  # OpenAI then sends "usage": null on every chunk but the last
                out["usage"] = None
            return out

        pieces = _pieces(answer.text)
        if not chat:
            chunks = [chunk(p) for p in pieces] + [chunk("", answer.finish_reason)]
        elif answer.tool is not None:  # the call's head, then its arguments in pieces
            function = {"name": answer.tool[1], "arguments": ""}
            call = {"index": 0, "id": answer.tool[0], "type": "function", "function": function}
            chunks = [chunk({"role": "assistant", "content": None, "tool_calls": [call]})]
            for p in pieces:
                chunks.append(chunk({"tool_calls": [{"index": 0, "function": {"arguments": p}}]}))
            chunks.append(chunk({}, answer.finish_reason))
        else:
            chunks = [chunk({"role": "assistant", "content": "", "refusal": None})]
            chunks += [chunk({"content": p}) for p in pieces] + [chunk({}, answer.finish_reason)]
        if with_usage:
            chunks.append({**head, "choices": [], "usage": answer.usage})
        return chunks

    async def _sse(self, chunks: list[dict]) -> Any:
        for i, chunk in enumerate(chunks):
            if i and self.stream_delay:
                await _sleep(self.stream_delay, self._wake)
            yield f"data: {json.dumps(chunk)}\n\n"
        yield "data: [DONE]\n\n"
