"""Reply shapes of today's open reasoning models and function-calling servers.

``ReasoningModel(inner, style)`` wraps any wire responder (``ModelReplies``) and
answers as a reasoning model does, thinking before the inner reply:

* ``qwen3``: ``<think>\\n…\\n</think>\\n\\n`` then the reply, in the content (Qwen3
  served without a reasoning parser);
* ``r1``: the reasoning, then a stray ``</think>`` (DeepSeek-R1: the chat
  template opens the block in the prompt);
* ``vllm``: the reasoning in ``WireReply.reasoning`` (vLLM with a reasoning
  parser: ``reasoning_content``; content null when the limit ends inside it);
* ``runaway``: ``<think>`` and reasoning that never ends (past 8192 tokens).

The reasoning (``reasoning_for``: 250-400 ``cl100k`` tokens, the same for the
same prompt) thinks aloud about the prompt and holds what a naive reader would
take for content: an ``Answer: maybe`` line, a ``- draft item`` bullet, a
``{"draft": true}`` fragment, a "Here are" line.

``SplitToolCalls(inner, parts)`` spreads a structured reply's one list over
several tool calls, as models do with long lists.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import replace
from typing import Any

from .replies import entities_in
from .wire import WireReply, WireRequest, count_tokens

__all__ = ["STYLES", "ReasoningModel", "SplitToolCalls", "reasoning_for"]

STYLES = ("qwen3", "r1", "vllm", "runaway")

_OPENINGS = (
    "Okay, let me see. The user wants this: {gist}. Let me think about how to approach it.",
    "Alright, the user wants me to deal with this: {gist}. Let me work through it first.",
)
# {name} / {other}: names from the prompt.
_STEPS = (
    "Let me check the passage for what it says about {name}.",
    "First I read the text again and note the names it mentions, like {name} and {other}.",
    "Let me check whether the dates and places agree with each other before I answer.",
    "Hmm, the text says it plainly, so there is no need to guess here.",
    "I should keep the reply in the format that was asked for, nothing extra around it.",
    "Let me double-check the spelling of {name} against the passage.",
    "So the key fact sits in one sentence; the rest is background I can leave out.",
    "Actually, let me re-read the instructions once more to be sure of the output's shape.",
    "Is {other} the same as the one mentioned earlier? The context suggests it is.",
    "I could add an explanation, but the instructions ask for the result only.",
)
_WAIT = "Wait, maybe this is really about {other}, not {name}. No, {name} fits better."
_TRAPS = (
    "Answer: maybe, but I am not sure yet.",
    "- draft item that I will drop later",
    'A first draft would be {"draft": true} but that is not the format they asked for.',
    "Here are the things I must not forget:",
)
_NOT_NAMES = {"What", "Who", "Which", "Where", "When", "How", "Why", "JSON", "Passage", "Question"}
_CLOSING = "Okay, I think I have everything I need. Let me write the reply now."
# The runaway's endless loop: made once, ~17,000 tokens.
_LOOP = "\n".join(
    _STEPS[i % len(_STEPS)].format(name="the first name", other="the second one")
    for i in range(1100)
)


def _gist(prompt: str) -> str:
    """What the prompt asks, in ten words: its last question, else its first line."""
    lines = [line.strip() for line in prompt.splitlines() if line.strip()]
    asked = [line for line in lines if line.endswith("?")]
    words = (asked[-1] if asked else lines[0] if lines else "something").split()[:10]
    return re.sub(r"[<>{}]", "", " ".join(words)).rstrip(".:?") or "something"


def reasoning_for(prompt: str, runaway: bool = False) -> str:
    """A model's thinking about ``prompt``: 250-400 tokens, or endless with ``runaway``."""
    seed = int(hashlib.sha1(prompt.encode()).hexdigest()[:8], 16)
    found = entities_in(prompt)
    names = [n[:30] for n in found if n not in _NOT_NAMES and not re.search(r"[<>{}]", n)]
    name = names[seed % len(names)] if names else "the main name"
    other = names[(seed + 1) % len(names)] if len(names) > 1 else "the other name"
    lines = _thinking(seed, _gist(prompt), name, other)
    if count_tokens("\n".join(lines)) > 380:  # long odd names: think in plain words
        lines = _thinking(seed, "this request", "the main name", "the other name")
    if runaway:  # a loop that never closes: more than any limit the suite asks for
        return "\n".join(lines) + "\n" + _LOOP
    return "\n".join([*lines, _CLOSING])


def _thinking(seed: int, gist: str, name: str, other: str) -> list[str]:
    order = sorted(range(len(_STEPS)), key=lambda i: (i * 7 + seed) % len(_STEPS))
    steps = [_STEPS[i].format(name=name, other=other) for i in order[:9]]
    steps.insert(2 + seed % 4, _WAIT.format(name=name, other=other))
    lines = [_OPENINGS[seed % 2].format(gist=gist)]
    for i, step in enumerate(steps):  # a trap after every other step
        lines.append(step)
        if i % 2 == 1 and i // 2 < len(_TRAPS):
            lines.append(_TRAPS[(seed + i // 2) % len(_TRAPS)])
    return lines


def _as_reply(reply: Any) -> WireReply:
    """A responder's answer as the server reads it: text, arguments or a ``WireReply``."""
    if isinstance(reply, str):
        return WireReply(text=reply)
    if isinstance(reply, (dict, list)):
        return WireReply(arguments=reply)
    return reply


class _Wrapper:
    """A responder around ``inner``, showing the inner one's attributes (``junk``, ``tasks``)."""

    inner: Any

    def __getattr__(self, name: str) -> Any:
        if name == "inner":  # not set yet (copy, pickle): no recursion
            raise AttributeError(name)
        return getattr(self.inner, name)


class ReasoningModel(_Wrapper):
    """A responder answering as a reasoning model of ``style`` does (see the module docs).

    A structured reply stays structured in the ``vllm`` style, the reasoning beside it.
    In ``qwen3`` and ``r1`` the think text is ``WireReply.preface``: the content beside
    tool calls (as Qwen's hermes parser leaves it), in front of the JSON text of a
    ``response_format`` request or of the text. ``runaway`` never gets to the reply.
    """

    def __init__(self, inner: Any, style: str) -> None:
        if style not in STYLES:
            raise ValueError(f"style must be one of {STYLES}, got {style!r}")
        self.inner, self.style = inner, style

    def __call__(self, request: WireRequest) -> WireReply:
        reply = _as_reply(self.inner(request))
        thinking = reasoning_for(request.prompt, runaway=self.style == "runaway")
        if self.style == "vllm":
            return replace(reply, reasoning=thinking)
        if self.style == "runaway":
            never = {"arguments": None, "tool_calls": None, "preface": ""}
            return replace(reply, text=f"<think>\n{thinking}", **never)
        if self.style == "qwen3":
            head = f"<think>\n{thinking}\n</think>\n\n"
        else:
            head = f"{thinking}\n</think>\n\n"
        # Beside tool calls, in front of JSON text or of the text alike.
        return replace(reply, preface=head + reply.preface)


class SplitToolCalls(_Wrapper):
    """A responder that spreads a structured reply's one list over ``parts`` tool calls.

    The list is the arguments themselves or the one list field of an object
    (``{"pairs": [...]}``); each call holds a share in the same shape, so a client that
    keeps only the first call loses items. Other replies, and requests without tools,
    pass through.
    """

    def __init__(self, inner: Any, parts: int = 2) -> None:
        if parts < 1:
            raise ValueError("parts must be at least 1")
        self.inner, self.parts = inner, parts

    def __call__(self, request: WireRequest) -> WireReply:
        reply = _as_reply(self.inner(request))
        args, key = reply.arguments, None
        if isinstance(args, dict):
            lists = [k for k, v in args.items() if isinstance(v, list)]
            key = lists[0] if len(lists) == 1 else None
        items = args if isinstance(args, list) else (args[key] if key else None)
        if not request.tools or not items or len(items) < 2:
            return reply
        n = min(self.parts, len(items))
        shares = [items[i * len(items) // n : (i + 1) * len(items) // n] for i in range(n)]
        calls = [share if key is None else {**args, key: share} for share in shares]
        return replace(reply, tool_calls=calls)
