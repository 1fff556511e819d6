"""``graphrag-ext serve``: index folders kept loaded behind a JSON API and a page.

Routes:

- ``GET /``: the page (ask, pick one index or several side by side, watch the
  answers stream, read each passage's file, position and evidence). Every asset
  ships in the package; nothing comes from a CDN.
- ``GET /api/indexes``: the served indexes (name, method, config, embedder, sizes).
- ``POST /api/query`` with ``{"index", "question", "top_k", "answer", "stream"}``:
  the object ``graphrag-ext query --json`` prints; with ``"stream": true`` the
  same as server-sent events (``passages``, then ``token`` pieces of the
  answer, then ``done`` with the whole object, or ``error``).

An index updated while it is served (``graphrag-ext index --update``) is loaded
again whole on the next question after the writer's swap, and only then
replaces the loaded one: a question is always answered from one complete index.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ..documents.errors import UserError
from ..documents.querying import OpenIndex

logger = logging.getLogger(__name__)

ASSETS = Path(__file__).parent / "assets"


class Library:
    """The served indexes by name (a folder's name, made unique)."""

    def __init__(
        self, folders: Sequence[str | Path], llm: Any = None, reranker: str | None = None
    ) -> None:
        self.llm = llm
        self.reranker = reranker
        self._folders: dict[str, Path] = {}
        for folder in folders:
            name, n = Path(folder).resolve().name, 2
            while name in self._folders:
                name, n = f"{Path(folder).name}-{n}", n + 1
            self._folders[name] = Path(folder)
        self._open = {name: OpenIndex(path, llm, reranker) for name, path in self._folders.items()}
        self._reloading = {name: threading.Lock() for name in self._folders}
        #: Loads after an update landed (``/api/indexes`` shows them).
        self.reloads = dict.fromkeys(self._folders, 0)

    def names(self) -> list[str]:
        return list(self._folders)

    def get(self, name: str) -> OpenIndex:
        """The index ``name``, loaded again first if an update has landed since."""
        if name not in self._open:
            raise KeyError(name)
        current = self._open[name]
        if current.changed_on_disk():
            with self._reloading[name]:  # one reload; other questions keep the old index
                current = self._open[name]
                if current.changed_on_disk():
                    try:
                        current = OpenIndex(self._folders[name], self.llm, self.reranker)
                    except UserError as exc:  # a swap in flight: keep answering from the old
                        logger.warning("serve: %s not reloaded yet (%s)", name, exc)
                    else:
                        self._open[name] = current
                        self.reloads[name] += 1
        return current

    def describe(self) -> list[dict[str, Any]]:
        return [
            {**self.get(n).describe(), "name": n, "reloads": self.reloads[n]} for n in self._open
        ]


def make_app(
    folders: Sequence[str | Path], llm: Any = None, reranker: str | None = None
) -> Starlette:
    """The ASGI app serving ``folders`` (each written by ``graphrag-ext index``).

    Args:
        llm: The LLM answering questions (``None``: retrieval only, said in each reply).
    """
    library = Library(folders, llm, reranker)

    async def page(_: Request) -> Response:
        return FileResponse(ASSETS / "index.html")

    async def indexes(_: Request) -> Response:
        return JSONResponse({"indexes": await run_in_threadpool(library.describe)})

    async def query(request: Request) -> Response:
        try:
            body = await request.json()
        except ValueError:
            return _error(400, "the body is not JSON")
        if not isinstance(body, dict):
            return _error(400, "the body must be a JSON object")
        try:
            index = await run_in_threadpool(library.get, str(body.get("index", "")))
        except KeyError:
            return _error(404, f"no index {body.get('index')!r}; served: {library.names()}")
        question = str(body.get("question") or "")
        answer = bool(body.get("answer", True))
        try:
            top_k = int(body.get("top_k", 5))
        except (TypeError, ValueError):
            return _error(400, f"top_k must be a whole number, got {body.get('top_k')!r}")
        try:
            asked = await run_in_threadpool(index.ask, question, top_k, answer, body.get("stream"))
        except UserError as exc:
            return _error(400, str(exc))
        if not body.get("stream"):
            return JSONResponse(asked)
        return StreamingResponse(_events(asked), media_type="text/event-stream")

    app = Starlette(
        routes=[
            Route("/", page),
            Route("/api/indexes", indexes),
            Route("/api/query", query, methods=["POST"]),
            Mount("/assets", StaticFiles(directory=ASSETS), name="assets"),
        ]
    )
    app.state.library = library
    return app


def _error(status: int, message: str) -> Response:
    return JSONResponse({"error": message}, status_code=status)


def _events(asked: Any) -> Iterator[str]:
    """Server-sent events of a streamed answer (run by Starlette in its thread pool)."""
    passages, pieces, finish = asked
    yield _event("passages", {"passages": passages})
    try:
        text = []
        for piece in pieces:
            text.append(piece)
            yield _event("token", {"text": piece})
        yield _event("done", finish("".join(text)))
    except Exception as exc:  # the LLM failed mid-answer: said, never a cut reply kept silently
        logger.warning("serve: the answer stream failed: %s", exc)
        yield _event("error", {"error": f"{type(exc).__name__}: {exc}"})


def _event(kind: str, data: dict[str, Any]) -> str:
    return f"event: {kind}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


def serve(
    folders: Sequence[str],
    host: str = "127.0.0.1",
    port: int = 8000,
    llm: Any = None,
    reranker: str | None = None,
):
    """Serve ``folders`` until interrupted (what ``graphrag-ext serve`` runs)."""
    import uvicorn

    app = make_app(folders, llm, reranker)
    names = ", ".join(app.state.library.names())
    print(f"serving {names} on http://{host}:{port}/ (Ctrl-C stops)", flush=True)
    uvicorn.run(app, host=host, port=port, log_level="warning")
