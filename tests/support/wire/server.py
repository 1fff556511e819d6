"""A real OpenAI-compatible HTTP server on loopback, for testing LLM clients over a real wire.

``WireServer`` runs uvicorn in a daemon
thread of the test process and answers ``/v1/chat/completions``, ``/v1/completions`` and
``/v1/models`` as OpenAI-compatible servers do (JSON, Server-Sent Events, ``usage`` in
tiktoken ``cl100k_base`` tokens, ``max_tokens`` cuts, tool calls, ``response_format``,
OpenAI-style errors), so a client's HTTP, pooling, retries, timeouts and SSE parsing all
really run. A *responder* decides what the "model" says; ``Fault``s make chosen
requests fail, stall, get cut or lose their connection (an example is in the package's
docs).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import functools
import inspect
import json
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from .answers import Answer, compose, response_body, stream_chunks
from .protocol import (
    CHAT_PATH,
    COMPLETIONS_PATH,
    ERRORS,
    PATHS,
    Fault,
    WireRecord,
    WireReply,
    WireRequest,
    encoding,
    parse_request,
)

__all__ = ["WireServer"]


async def _sleep(seconds: float, wake: asyncio.Event | None) -> None:
    """Sleep without blocking the loop; setting ``wake`` (on stop) cuts it short."""
    if seconds > 0:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for((wake or asyncio.Event()).wait(), seconds)


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
            ``WireRequest``; returns
            a ``WireReply``, a string
            (the text) or a dict/list (the ``arguments``). May be ``async``. Settable at
            any time as :attr:`responder`. Default: answers ``"OK"``. If it raises, the
            client gets a 500 and the exception is kept in :attr:`errors`.
        api_key: The key clients must send as ``Authorization: Bearer <key>``.
        model: The model ``/v1/models`` lists (replies name the model requested).
        stream_delay: Seconds between streamed chunks.
        reasoning_field: The message field reasoning is sent in (``reasoning_content``, as
            vLLM sends it; newer vLLM sends ``reasoning``).

    Attributes:
        base_url: ``"http://127.0.0.1:PORT/v1"`` once started (``port`` holds PORT).
        log: A ``WireRecord`` per
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
        reasoning_field: str = "reasoning_content",
    ) -> None:
        self.responder = responder or (lambda request: WireReply(text="OK"))
        self.reasoning_field = reasoning_field
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

    def openai_like(self, **kwargs: Any) -> Any:
        """An ``OpenAILike`` chat client of this server (``kwargs`` override its defaults:
        a 16,000-token window, no function calling)."""
        from llama_index.llms.openai_like import OpenAILike

        defaults = {"model": self.model, "is_chat_model": True, "context_window": 16000}
        return OpenAILike(api_base=self.base_url, api_key=self.api_key, **{**defaults, **kwargs})

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
            record = WireRecord(parse_request(path, body, headers, self._number), peer=peer)
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

    def _finish(self, record: WireRecord, status: int, answer: Answer | None = None) -> None:
        with self._lock:
            record.status = status
            if answer is not None:
                record.text, record.usage = answer.text, answer.usage
                record.reasoning = answer.reasoning or None
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
        kind, code, default = ERRORS.get(status, (kind, None, "Error."))
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
        if fault is not None and fault.reset_after == 0:
            self._finish(record, 0)
            await self._drop(peer)
            return Response()  # never sent: uvicorn sends nothing on a lost connection
        try:
            reply = await self._call_responder(wreq)
        except Exception as exc:  # a bug in the test's responder: a 500, and kept
            with self._lock:
                self.errors.append(exc)
            return fail(500, f"The responder raised {exc!r}")
        answer = compose(wreq, reply, fault.cut_at if fault else None)
        # Counted before sending: a client that has read the reply sees it in stats().
        self._finish(record, 200, answer)
        if wreq.stream:
            chunks = stream_chunks(wreq, answer, self.model, self.reasoning_field)
            reset = fault.reset_after if fault is not None else None
            sse = self._sse(chunks, reset, peer)
            return StreamingResponse(sse, media_type="text/event-stream")
        return JSONResponse(response_body(wreq, answer, self.model, self.reasoning_field))

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

    async def _sse(self, chunks: list[dict], reset_after: int | None, peer: str | None) -> Any:
        for i, chunk in enumerate(chunks):
            if reset_after is not None and i >= reset_after:
                await self._drop(peer)  # the client reads an incomplete chunked body
                return
            if i and self.stream_delay:
                await _sleep(self.stream_delay, self._wake)
            yield f"data: {json.dumps(chunk)}\n\n"
        yield "data: [DONE]\n\n"

    async def _drop(self, peer: str | None) -> None:
        """Close the connection of ``peer`` (``host:port``), with nothing more sent on it.

        Closed from the server's side rather than by raising in the app: uvicorn would
        answer a 500 before the response starts, and log the exception after.
        """
        server = self._server
        if server is None:
            return
        live = server.server_state.connections
        mine = [c for c in live if _peer_of(c) == peer]
        for connection in mine:
            connection.transport.close()  # what was written before still goes out
        # Once uvicorn has seen the connection lost it drops whatever the app sends.
        deadline = time.monotonic() + 2.0
        while any(c in live for c in mine) and time.monotonic() < deadline:
            await asyncio.sleep(0.001)


def _peer_of(connection: Any) -> str | None:
    client = getattr(connection, "client", None)  # (host, port), set by uvicorn's protocols
    return f"{client[0]}:{client[1]}" if client else None
