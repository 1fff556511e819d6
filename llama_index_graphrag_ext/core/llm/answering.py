"""The stock query engine's answer, read the way the suite reads every reply.

``as_query_engine()`` of the indexes without an engine of their own is
LlamaIndex's ``RetrieverQueryEngine``; its synthesizer calls the LLM itself,
so a reasoning model's ``<think>`` block, R1's stray ``</think>`` or a reply
cut by the length limit would be the answer. :class:`CallerLLM` puts the
user's LLM behind an :class:`.calls.LLMCaller` (reasoning dropped in replies
and streams, a cut reply asked again with more room, an empty one an error)
and :class:`AnswerEngine` flags an answer still cut in
``response.metadata["answer_cut"]``.

A plain ``RetrieverQueryEngine(retriever, synthesizer)`` over
``index.as_retriever()`` stays possible: it calls the LLM as it is.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

from llama_index.core.base.llms.types import (
    CompletionResponse,
    CompletionResponseAsyncGen,
    CompletionResponseGen,
    LLMMetadata,
)
from llama_index.core.llms import CustomLLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import QueryBundle
from pydantic import PrivateAttr

from .calls import LLMCaller

__all__ = ["AnswerEngine", "CallerLLM", "answer_engine", "answering"]


@dataclass
class _Answer:
    """What the answers of one query said about themselves (streams fill it when they end)."""

    cut: bool = False
    target: dict | None = None  # the response's metadata, once the engine has it
    # LlamaIndex's refine step reads a ValueError as "no structured response" and answers
    # "Empty Response": the engine raises what the answer step raised instead.
    error: BaseException | None = None

    def note(self, cut: bool) -> None:
        self.cut = self.cut or cut
        if self.target is not None:
            self.target["answer_cut"] = self.cut


_ANSWER: contextvars.ContextVar[_Answer | None] = contextvars.ContextVar(
    "graphrag_ext_answer", default=None
)


def _note(cut: bool) -> None:
    answer = _ANSWER.get()
    if answer is not None:
        answer.note(cut)


@contextlib.contextmanager
def _recorded() -> Iterator[None]:
    """What the answer step raises is also kept for the engine (see :attr:`_Answer.error`)."""
    try:
        yield
    except Exception as exc:
        answer = _ANSWER.get()
        if answer is not None and answer.error is None:
            answer.error = exc
        raise


def _response(reply: Any) -> CompletionResponse:
    _note(reply.finish_reason == "length")
    return CompletionResponse(
        text=reply.text, additional_kwargs={"finish_reason": reply.finish_reason}
    )


class CallerLLM(CustomLLM):
    """An LLM for LlamaIndex components that call one themselves, answering through
    ``caller`` (a completion model to them: the caller sends the prompt as the user's
    message to a chat model)."""

    _caller: LLMCaller = PrivateAttr()

    def __init__(self, caller: LLMCaller, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._caller = caller

    @classmethod
    def class_name(cls) -> str:
        return "CallerLLM"

    @property
    def caller(self) -> LLMCaller:
        return self._caller

    @property
    def metadata(self) -> LLMMetadata:
        inner = self._caller.llm.metadata
        return LLMMetadata(
            context_window=inner.context_window,
            num_output=inner.num_output,
            model_name=inner.model_name,
            is_chat_model=False,
            is_function_calling_model=False,
        )

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        with _recorded():
            return _response(self._caller.complete(prompt, allow_cut=True))

    async def acomplete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponse:
        with _recorded():
            return _response(await self._caller.acomplete(prompt, allow_cut=True))

    def stream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseGen:
        # Called while the engine's query runs: the stream reports to that query's answer.
        answer, report = _ANSWER.get(), {}
        pieces = self._caller.stream(prompt, report=report)

        def gen() -> Iterator[CompletionResponse]:
            text = ""
            try:
                for piece in pieces:
                    text += piece
                    yield CompletionResponse(text=text, delta=piece)
            finally:
                if answer is not None:
                    answer.note(bool(report.get("cut")))

        return gen()

    async def astream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseAsyncGen:
        answer, report = _ANSWER.get(), {}
        pieces = self._caller.astream(prompt, report=report)

        async def gen() -> AsyncIterator[CompletionResponse]:
            text = ""
            try:
                async for piece in pieces:
                    text += piece
                    yield CompletionResponse(text=text, delta=piece)
            finally:
                if answer is not None:
                    answer.note(bool(report.get("cut")))

        return gen()


class AnswerEngine(RetrieverQueryEngine):
    """``RetrieverQueryEngine`` whose responses say ``metadata["answer_cut"]`` (a stream's
    once it has ended)."""

    def _query(self, query_bundle: QueryBundle) -> Any:
        answer = _Answer()
        token = _ANSWER.set(answer)
        try:
            response = super()._query(query_bundle)
        finally:
            _ANSWER.reset(token)
        return _flagged(response, answer)

    async def _aquery(self, query_bundle: QueryBundle) -> Any:
        answer = _Answer()
        token = _ANSWER.set(answer)
        try:
            response = await super()._aquery(query_bundle)
        finally:
            _ANSWER.reset(token)
        return _flagged(response, answer)


def _flagged(response: Any, answer: _Answer) -> Any:
    if answer.error is not None:
        raise answer.error
    if getattr(response, "metadata", None) is None:
        response.metadata = {}
    answer.target = response.metadata
    answer.note(answer.cut)
    # LlamaIndex's synthesizers ask for the stream only when it is read: read it with
    # this query's answer in view, so that its end reaches the response's metadata.
    pieces = getattr(response, "response_gen", None)
    if hasattr(pieces, "__anext__"):
        response.response_gen = _ain_view(pieces, answer)
    elif pieces is not None:
        response.response_gen = _in_view(pieces, answer)
    return response


def _in_view(pieces: Iterator[Any], answer: _Answer) -> Iterator[Any]:
    context = contextvars.copy_context()
    context.run(_ANSWER.set, answer)
    iterator = iter(pieces)
    while True:
        try:
            piece = context.run(next, iterator)
        except StopIteration:
            return
        yield piece


async def _ain_view(pieces: Any, answer: _Answer) -> AsyncIterator[Any]:
    token = _ANSWER.set(answer)
    try:
        async for piece in pieces:
            yield piece
    finally:
        _ANSWER.reset(token)


def answer_engine(
    retriever: Any, llm: Any, settings: Any = None, **kwargs: Any
) -> RetrieverQueryEngine:
    """An :class:`AnswerEngine` over ``retriever`` answering with ``llm`` through a caller
    with ``settings`` (an :class:`.settings.LLMSettings`); LlamaIndex's own when the user
    brings a synthesizer (it calls its LLM as it is) or there is no LLM."""
    from .settings import LLMSettings

    if llm is None or kwargs.get("response_synthesizer") is not None:
        return RetrieverQueryEngine.from_args(retriever, llm=llm, **kwargs)
    caller = (settings or LLMSettings()).new_caller(llm)
    return AnswerEngine.from_args(retriever, llm=CallerLLM(caller), **kwargs)


def answering(llm: Any, settings: Any = None, **kwargs: Any) -> Any:
    """``synthesize(question, nodes) -> Response``: LlamaIndex's synthesizer (``kwargs``:
    ``response_mode``, ``text_qa_template``, ...) answering through a caller of ``llm``,
    ``metadata["answer_cut"]`` set, and what the answer step raised raised."""
    from llama_index.core import get_response_synthesizer

    from .settings import LLMSettings

    caller = (settings or LLMSettings()).new_caller(llm)
    synthesizer = get_response_synthesizer(llm=CallerLLM(caller), **kwargs)

    def synthesize(question: str, nodes: list) -> Any:
        answer = _Answer()
        token = _ANSWER.set(answer)
        try:
            response = synthesizer.synthesize(question, nodes=nodes)
        finally:
            _ANSWER.reset(token)
        return _flagged(response, answer)

    return synthesize
