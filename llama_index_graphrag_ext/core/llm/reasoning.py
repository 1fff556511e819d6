"""Reasoning models: how each one shows its reasoning, learned from its replies.

Qwen3 served without a reasoning parser writes ``<think>…</think>`` before
its answer; DeepSeek-R1's chat template opens the block in the prompt, so its
reply has only the closing tag; vLLM with a reasoning parser (and LlamaIndex's
``ThinkingBlock``) hands the reasoning over in a field of its own. Two things
depend on which: whether a stream can be shown as it arrives (with R1's shape
nothing before ``</think>`` can be shown until the tag comes), and whether a
short step needs room for the reasoning before its answer. Both are learned
per model, process-wide, from every reply the suite reads.
"""

from __future__ import annotations

import re
import threading
from typing import Any, Literal

from .parse import REASONING_TAGS

__all__ = ["REASONING_ROOM", "ReasoningFilter", "Style", "learn", "reasoning_text", "style_of"]

#: Tokens added to every step's budget once its model is known to reason, unless the
#: component's ``reasoning_budget`` says otherwise: a few hundred tokens of reasoning
#: never fit a 32-token yes/no budget, however often it is doubled.
REASONING_ROOM = 2048

Style = Literal["none", "tags", "stray", "field"]

_OPENING = re.compile(r"<(" + "|".join(REASONING_TAGS) + r")>", re.IGNORECASE)
_CLOSING = re.compile(r"</(" + "|".join(REASONING_TAGS) + r")>", re.IGNORECASE)
_OPENINGS = tuple(f"<{tag}>" for tag in REASONING_TAGS)

_RANK = {"none": 0, "tags": 1, "field": 2, "stray": 3}
_LOCK = threading.Lock()
_STYLES: dict[str, Style] = {}


def reasoning_text(response: Any) -> str:
    """Reasoning a response carries outside its text (vLLM's ``reasoning_content`` or
    ``reasoning``, LlamaIndex thinking blocks and ``thinking_delta``); ``""`` if none."""
    from .usage import _as_mapping

    found: list[str] = []
    message = getattr(response, "message", None)
    for block in getattr(message, "blocks", None) or ():
        if type(block).__name__ == "ThinkingBlock" and getattr(block, "content", None):
            found.append(str(block.content))
    extra = getattr(response, "additional_kwargs", None) or {}
    if extra.get("thinking_delta"):
        found.append(str(extra["thinking_delta"]))
    raw = _as_mapping(getattr(response, "raw", None)) or {}
    choices = raw.get("choices")
    if isinstance(choices, (list, tuple)) and choices:
        first = _as_mapping(choices[0]) or {}
        for part in ("message", "delta"):
            body = _as_mapping(first.get(part)) or {}
            for name in ("reasoning_content", "reasoning"):
                if isinstance(body.get(name), str) and body[name]:
                    found.append(body[name])
    return "".join(dict.fromkeys(found))  # a block and its raw field say the same once


def style_of(raw: str, reasoning: str = "") -> Style | None:
    """How a reply shows its reasoning; ``None`` when it cannot tell (an empty reply)."""
    opening, closing = _OPENING.search(raw or ""), _CLOSING.search(raw or "")
    if closing is not None and (opening is None or closing.start() < opening.start()):
        return "stray"
    if reasoning:
        return "field"
    if opening is not None:
        return "tags"
    return "none" if (raw or "").strip() else None


def learn(fingerprint: str, style: Style | None) -> None:
    """Remember how the model ``fingerprint`` reasons. A style seen once stays: R1's stray
    tag over any other (its streams must be held), any reasoning over none."""
    if style is None:
        return
    with _LOCK:
        known = _STYLES.get(fingerprint)
        if known is None or _RANK[style] > _RANK[known]:
            _STYLES[fingerprint] = style


#: Clients of hosted APIs that never put reasoning in the content (their reasoning models
#: keep it hidden or in blocks of their own): their streams are shown from the start.
HOSTED_CLIENTS = frozenset({"OpenAI", "AzureOpenAI", "Anthropic", "GoogleGenAI", "Gemini"})


def prior_style(llm: Any) -> Style | None:
    """What is known of ``llm``'s reasoning before its first reply (its client's API)."""
    return "none" if type(llm).__name__ in HOSTED_CLIENTS else None


def known_style(fingerprint: str) -> Style | None:
    """What :func:`learn` saw of the model, ``None`` before its first usable reply."""
    with _LOCK:
        return _STYLES.get(fingerprint)


def forget(fingerprint: str | None = None) -> None:
    """Forget what was learned (of one model, or of all): tests, and a server whose model
    was swapped behind the same name."""
    with _LOCK:
        if fingerprint is None:
            _STYLES.clear()
        else:
            _STYLES.pop(fingerprint, None)


class ReasoningFilter:
    """Drops reasoning from text that arrives in pieces, as :func:`.parse.strip_reasoning`
    drops it from a whole reply.

    A possible opening tag is held back until the next piece settles it, and an
    unclosed block is dropped to the end. With ``hold=True`` (a model whose
    reply may carry only R1's closing tag, or one not seen yet) nothing is shown
    until a closing tag ends the reasoning (what came before it is dropped) or
    the text ends (all of it was the answer).
    """

    def __init__(self, hold: bool = False) -> None:
        self._held = ""
        self._inside: str | None = None  # the tag of the block being dropped
        self._skip_space = True
        self._hold = hold

    def feed(self, piece: str) -> str:
        """The part of ``piece`` (with what was held) that is sure to be shown."""
        held, shown = self._held + piece, []
        if self._hold:
            if _OPENING.match(held.lstrip()) or not held.strip():
                self._hold = bool(not held.strip())  # an opening tag: the usual blocks
            else:
                close = _CLOSING.search(held)
                if close is None:
                    self._held = held
                    return ""
                held, self._hold = held[close.end() :], False
        while held:
            if self._inside is not None:
                close = f"</{self._inside}>"
                end = held.lower().find(close)
                if end < 0:  # keep what may be the start of the closing tag
                    held = held[-(len(close) - 1) :]
                    break
                held, self._inside, self._skip_space = held[end + len(close) :], None, True
                continue
            if self._skip_space:
                held = held.lstrip()
                if not held:
                    break
                self._skip_space = False
            start = held.find("<")
            if start < 0:
                shown.append(held)
                held = ""
                break
            shown.append(held[:start])
            held = held[start:]
            if opening := _OPENING.match(held):
                self._inside, held = opening.group(1).lower(), held[opening.end() :]
            elif any(tag.startswith(held.lower()) for tag in _OPENINGS):
                break  # too short to tell: wait for the next piece
            else:
                shown.append("<")
                held = held[1:]
        self._held = held
        return "".join(shown)

    def flush(self) -> str:
        """What is still held once the text has ended (nothing inside an open block)."""
        held, self._held = self._held, ""
        if self._inside is not None:
            return ""
        return held.strip() if self._hold else held
