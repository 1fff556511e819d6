"""How the wire turns a responder's reply into an OpenAI-style completion.

Pure functions of the request and the reply: the tool calls or JSON content a request
asks for, reasoning sent apart (as vLLM's reasoning parsers do), ``max_tokens`` cuts,
``usage`` counted with the server's tokenizer, and the JSON body or Server-Sent-Event
chunks that carry it.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from .protocol import CHAT_PATH, COMPLETIONS_PATH, WireReply, WireRequest, count_tokens, encoding

__all__ = ["Answer", "compose", "response_body", "stream_chunks"]


@dataclass
class Answer:
    """The decided completion of one request.

    ``content`` is the message content (a completion's text), ``reasoning`` what is sent
    in the reasoning field, ``calls`` the tool calls as ``(call id, arguments)``, all
    naming the function ``name``.
    """

    content: str
    finish_reason: str
    usage: dict
    task: str | None
    reasoning: str = ""
    calls: list[tuple[str, str]] = field(default_factory=list)
    name: str = ""

    @property
    def text(self) -> str:
        """What :attr:`WireRecord.text` keeps: the calls' arguments (one per line), else the content."""
        return "\n".join(args for _, args in self.calls) if self.calls else self.content


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


def _call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


def _spend(text: str, budget: int | None) -> tuple[str, int, bool]:
    """``text`` within ``budget`` tokens: ``(kept, tokens used, cut)``."""
    tokens = encoding().encode(text, disallowed_special=())
    if budget is not None and len(tokens) > budget:
        return encoding().decode(tokens[: max(budget, 0)]), max(budget, 0), True
    return text, len(tokens), False


def compose(request: WireRequest, reply: WireReply, cut_at: int | None) -> Answer:
    fmt = (request.response_format or {}).get("type")
    structured = reply.arguments is not None or reply.tool_calls is not None
    tools = request.path == CHAT_PATH and request.tools and request.tool_choice != "none"
    payloads: list[str] = []
    if tools and structured:
        several = reply.tool_calls if reply.tool_calls is not None else [reply.arguments]
        payloads, text, finish = [json.dumps(a) for a in several], "", "tool_calls"
    elif fmt in ("json_schema", "json_object") and structured:
        payload = reply.arguments if reply.arguments is not None else reply.tool_calls[0]
        text, finish = json.dumps(payload), "stop"
    else:  # text, also when the request has tools but the reply no arguments
        text, finish = reply.text, "stop"
    text, finish = reply.preface + text, reply.finish_reason or finish

    # The prompt, plus the JSON of tools and schemas: real servers put those in
    # front of the model too, and bill them.
    prompt_tokens = count_tokens(request.prompt)
    if request.tools:
        prompt_tokens += count_tokens(json.dumps(request.tools))
    if fmt == "json_schema":
        prompt_tokens += count_tokens(json.dumps(request.response_format))

    # max_tokens (or a fault's cut) stops the model mid-text, as a real one stops. It
    # writes the reasoning first, then the content, then the calls in order.
    limits = [n for n in (request.max_tokens, cut_at) if n is not None]
    budget = min(limits) if limits else None
    used, cut = 0, False

    def take(piece: str) -> str:
        nonlocal used, cut
        kept, spent, cut = _spend(piece, None if budget is None else budget - used)
        used += spent
        return kept

    reasoning = take(reply.reasoning or "")
    content = "" if cut else take(text)
    calls: list[tuple[str, str]] = []
    for payload in payloads:
        if cut:
            break
        kept = take(payload)
        if kept or not cut:  # a call cut before its first token was never written
            calls.append((_call_id(), kept))
    if cut:
        finish = "length"
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": used}
    usage["total_tokens"] = prompt_tokens + used
    name = _tool_name(request) if tools else ""
    return Answer(content, finish, usage, reply.task, reasoning, calls, name)


def _head(request: WireRequest, kind: str, model: str) -> dict:
    prefix = "chatcmpl" if request.path == CHAT_PATH else "cmpl"
    model = request.body.get("model") or model
    head = {"id": f"{prefix}-{uuid.uuid4().hex[:24]}", "object": kind}
    return {**head, "created": int(time.time()), "model": model, "system_fingerprint": None}


def _call(answer: Answer, cid: str, arguments: str) -> dict:
    function = {"name": answer.name, "arguments": arguments}
    return {"id": cid, "type": "function", "function": function}


def response_body(
    request: WireRequest, answer: Answer, model: str, reasoning_field: str = "reasoning_content"
) -> dict:
    """The JSON body of a non-streamed answer (chat ``message`` or completion ``text``).

    A completion has no reasoning field: its reasoning is counted, not sent.
    """
    if request.path == COMPLETIONS_PATH:
        choice: dict[str, Any] = {"text": answer.content, "index": 0, "logprobs": None}
        head = _head(request, "text_completion", model)
    else:
        # Empty content beside reasoning or calls is null, as vLLM and OpenAI send it.
        empty = None if (answer.reasoning or answer.calls) else ""
        content = answer.content or empty
        message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None}
        if answer.reasoning:
            message[reasoning_field] = answer.reasoning
        if answer.calls:
            message["tool_calls"] = [_call(answer, cid, args) for cid, args in answer.calls]
        choice = {"index": 0, "message": message, "logprobs": None}
        head = _head(request, "chat.completion", model)
    choice["finish_reason"] = answer.finish_reason
    return {**head, "choices": [choice], "usage": answer.usage}


def stream_chunks(
    request: WireRequest, answer: Answer, model: str, reasoning_field: str = "reasoning_content"
) -> list[dict]:
    """The stream's chunks, all made up front (the reply is already decided).

    In the order the model writes them: reasoning pieces, content pieces, then each
    call's head (``index``, id, name) followed by its arguments in pieces.
    """
    chat = request.path == CHAT_PATH
    head = _head(request, "chat.completion.chunk" if chat else "text_completion", model)
    options = request.body.get("stream_options")
    with_usage = isinstance(options, dict) and bool(options.get("include_usage"))

    def chunk(payload: Any, finish: str | None = None) -> dict:
        choice = {"index": 0, "delta" if chat else "text": payload}
        out = {**head, "choices": [{**choice, "logprobs": None, "finish_reason": finish}]}
        if with_usage:  # OpenAI then sends "usage": null on every chunk but the last
            out["usage"] = None
        return out

    if not chat:
        chunks = [chunk(p) for p in _pieces(answer.content)] + [chunk("", answer.finish_reason)]
    else:
        chunks = [chunk({"role": "assistant", "content": "", "refusal": None})]
        chunks += [chunk({reasoning_field: p}) for p in _pieces(answer.reasoning)]
        chunks += [chunk({"content": p}) for p in _pieces(answer.content)]
        for i, (cid, args) in enumerate(answer.calls):
            call = {"index": i, **_call(answer, cid, "")}
            chunks.append(chunk({"tool_calls": [call]}))
            for p in _pieces(args):
                chunks.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": p}}]}))
        chunks.append(chunk({}, answer.finish_reason))
    if with_usage:
        chunks.append({**head, "choices": [], "usage": answer.usage})
    return chunks
