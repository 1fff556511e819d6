"""Reply shapes of today's open reasoning models and function-calling servers.

``ReasoningModel(inner, style)`` wraps any wire responder (``ModelReplies``) and
answers as a reasoning model does, before the inner reply:

* ``qwen3``: ``<think>…</think>`` in the content (Qwen3 served without a
  reasoning parser);
* ``r1``: the reasoning, then a stray ``</think>`` (DeepSeek-R1: the chat
  template opens the block in the prompt);
* ``vllm``: the reasoning in ``reasoning_content`` (vLLM with a reasoning
  parser; content null when the limit ends inside the reasoning);
* ``runaway``: ``<think>`` and reasoning that never ends.

The reasoning, a few hundred tokens per prompt (the same each time), holds what
a naive reader would take for content: an ``Answer:`` line, a bullet, a JSON
fragment, a "Here are" line.

``SplitToolCalls(inner, parts)`` spreads a structured reply's one list over
several tool calls, as models do with long lists.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from typing import Any

from .wire import WireReply, WireRequest

__all__ = ["STYLES", "ReasoningModel", "SplitToolCalls", "reasoning_for"]

STYLES = ("qwen3", "r1", "vllm", "runaway")

_OPENINGS = ("Okay, let me work through this.", "Alright, the user wants something specific.")
_STEPS = (
    "First I read the passage again and note the names it mentions.",
    "Wait, maybe the question is about the second sentence, not the first.",
    "Let me check whether the dates agree with each other before I answer.",
    "Hmm, the text says it plainly, so there is no need to guess here.",
    "I should keep the reply in the format that was asked for, nothing extra.",
    "Let me double-check the spelling of each name against the passage.",
)
_TRAPS = (
    "Answer: maybe, but I am not sure yet.",
    "- draft item that I will drop",
    'A first draft would be {"draft": true} but that is not the format.',
    "Here are the things I must not forget:",
)


def reasoning_for(prompt: str, runaway: bool = False) -> str:
    """A model's thinking about ``prompt``: about 300 cl100k tokens, or endless."""
    seed = int(hashlib.sha1(prompt.encode()).hexdigest()[:8], 16)
    lines = [_OPENINGS[seed % 2]]
    for i in range(4):
        lines += [_STEPS[(seed + i) % len(_STEPS)], _TRAPS[(seed + i) % len(_TRAPS)]]
        lines += [_STEPS[(seed + 3 * i + 1) % len(_STEPS)]]
    if runaway:  # a loop that never closes: more than any limit the suite asks for
        lines += [_STEPS[i % len(_STEPS)] for i in range(1200)]
    return "\n".join(lines)


class ReasoningModel:
    """A responder answering as a reasoning model of ``style`` does (see the module docs)."""

    def __init__(self, inner: Any, style: str) -> None:
        if style not in STYLES:
            raise ValueError(f"style must be one of {STYLES}, got {style!r}")
        self.inner, self.style = inner, style

    def __getattr__(self, name: str) -> Any:  # junk, tasks, ... of the inner responder
        return getattr(self.inner, name)

    def __call__(self, request: WireRequest) -> WireReply:
        reply = self.inner(request)
        reply = WireReply(text=reply) if isinstance(reply, str) else reply
        thinking = reasoning_for(request.prompt, runaway=self.style == "runaway")
        if self.style == "vllm":
            return replace(reply, reasoning=thinking)
        if self.style == "runaway":
            return replace(reply, text=f"<think>\n{thinking}", arguments=None, tool_calls=None)
        head = (
            f"<think>\n{thinking}\n</think>\n\n"
            if self.style == "qwen3"
            else f"{thinking}\n</think>\n\n"
        )
        structured = reply.arguments is not None or reply.tool_calls is not None
        if structured and request.tools:
            # A tool call beside thinking text: the content carries the think block.
            return replace(reply, reasoning=None, text=head)
        if structured and request.response_format:
            import json

            return replace(reply, text=head + json.dumps(reply.arguments), arguments=None)
        return replace(reply, text=head + reply.text)


class SplitToolCalls:
    """A responder that spreads a structured reply's one list over ``parts`` tool calls."""

    def __init__(self, inner: Any, parts: int = 2) -> None:
        self.inner, self.parts = inner, parts

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def __call__(self, request: WireRequest) -> WireReply:
        reply = self.inner(request)
        reply = WireReply(text=reply) if isinstance(reply, str) else reply
        args = reply.arguments
        key = None
        if isinstance(args, dict):
            lists = [k for k, v in args.items() if isinstance(v, list)]
            key = lists[0] if len(lists) == 1 else None
        items = args if isinstance(args, list) else (args[key] if key else None)
        if not request.tools or not items or len(items) < 2:
            return reply
        size = -(-len(items) // self.parts)
        shares = [items[i : i + size] for i in range(0, len(items), size)]
        calls = [share if key is None else {**args, key: share} for share in shares]
        return replace(reply, tool_calls=calls)
