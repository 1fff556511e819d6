"""Structured output: the pydantic models every LLM step asks for (a mixin of ``LLMCaller``).

Natively where the LLM supports it (JSON schema or a forced tool call, through
LlamaIndex's ``astructured_predict``), else the JSON in the reply read by
:func:`.parse.validate_reply`, with a repair re-ask when it is unusable.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from typing import Any, TypeVar

from llama_index.core.prompts import PromptTemplate
from pydantic import BaseModel, ValidationError

from .loop import on_suite_loop, run_sync
from .parse import LLMOutputError, list_field, validate_reply
from .reasoning import reasoning_text
from .retry import rejects_structured_output
from .target import LENGTH_RETRIES, LLMTruncatedError
from .usage import capture, finish_reason, fresh_call_depth

# The caller's log: one logger for everything an LLMCaller does.
logger = logging.getLogger(__package__ + ".calls")

__all__ = ["StructuredCalls"]

M = TypeVar("M", bound=BaseModel)

_REPAIR_NOTE = (
    "\n\nYour previous reply could not be used ({error}). Reply again with only the "
    "requested JSON, nothing before or after it."
)


class StructuredCalls:
    """``astructured`` / ``structured`` of :class:`.calls.LLMCaller`."""

    # Provided by LLMCaller.
    mode: str
    meter: Any
    cache: Any
    retry: Any
    llm_name: str

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

        A server that rejects native structured output switches this caller to
        text mode, once, with a warning.

        Args:
            prompt: The prompt; it should describe the JSON wanted (text mode reads it).
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
        """Structured output from the server; a cut reply is asked again with more room.

        Cut means cut even when the partial JSON parses: a list cut short is not the list.
        """
        template = PromptTemplate(prompt)  # already formatted; braces pass through untouched
        for round_ in range(LENGTH_RETRIES + 1):
            reasons: list[str | None] = []

            async def attempt(limit: int | None = limit, reasons: list = reasons) -> M:
                async with self._sem():
                    self.meter.add(calls=1)
                    with fresh_call_depth(), capture() as cap:
                        try:
                            if self.mode == "function_calling":
                                call = self._tool_calls(prompt, output_cls, limit)
                            else:
                                call = self._target.astructured_predict(
                                    output_cls, template, llm_kwargs=self._limit_kwargs(limit)
                                )
                            value = await self._timed(call)
                        except Exception as exc:
                            # A cut reply that did not parse: asked again below, not a failure.
                            if cap.last and finish_reason(cap.last[1]) == "length":
                                raise LLMTruncatedError(f"structured reply cut: {exc}") from exc
                            raise
                        finally:
                            tokens = cap.tokens(prompt) if cap.last else (0, 0)
                            self.meter.add(prompt_tokens=tokens[0], completion_tokens=tokens[1])
                            reasons.append(finish_reason(cap.last[1]) if cap.last else None)
                        if reasons[-1] == "length":
                            raise LLMTruncatedError("structured reply cut by the length limit")
                        return value

            try:
                return await self._retrying(
                    attempt,
                    f"structured call ({self.llm_name})",
                    expected=rejects_structured_output,
                )
            except LLMTruncatedError:
                bigger = None if round_ == LENGTH_RETRIES else self._next_limit(limit, prompt)
                if bigger is None:
                    self.meter.add(truncated=1)
                    raise
                self.meter.add(length_retries=1)
                limit = bigger
            except Exception as exc:
                if rejects_structured_output(exc):
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

    async def _tool_calls(self, prompt: str, output_cls: type[M], limit: int | None) -> M:
        """``output_cls`` from a forced tool call, every call of the reply merged.

        LlamaIndex's ``astructured_predict`` keeps the first call only; models
        split a long list over several calls. A model that answers in text
        instead (its JSON in the content) is read as text mode reads it.
        """
        from llama_index.core.base.llms.types import ChatMessage
        from llama_index.core.program.function_program import get_function_tool

        response = await self._target.achat_with_tools(
            [get_function_tool(output_cls)],
            chat_history=[ChatMessage(role="user", content=prompt)],
            allow_parallel_tool_calls=True,
            tool_required=True,
            **self._limit_kwargs(limit),
        )
        content = response.message.content or ""
        self._learn(content, reasoning_text(response))
        if finish_reason(response) == "length":
            raise LLMTruncatedError("tool call cut by the length limit", raw=content)
        calls = self._target.get_tool_calls_from_response(response, error_on_no_tool_call=False)
        if not calls:
            return await asyncio.to_thread(validate_reply, output_cls, content)
        return _merged(output_cls, [call.tool_kwargs for call in calls])

    def structured(self, prompt: str, output_cls: type[M], **kwargs: Any) -> M:
        """Synchronous :meth:`astructured`."""
        return run_sync(lambda: self.astructured(prompt, output_cls, **kwargs))


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


def _merged(output_cls: type[M], arguments: list[Any]) -> M:
    """One ``output_cls`` from the arguments of several tool calls: a model with one list
    field gets every call's items, in order; any other model, the first call."""
    values = [validate_reply(output_cls, json.dumps(args)) for args in arguments]
    field = list_field(output_cls)
    if field is None or len(values) == 1:
        return values[0]
    return output_cls.model_validate({field: [i for v in values for i in getattr(v, field)]})
