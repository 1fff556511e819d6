"""How the wire turns a responder's reply into an OpenAI-style completion.

Pure functions of the request and the reply: the tool call or JSON content a request
asks for, ``max_tokens`` cuts, ``usage`` counted with the server's tokenizer, and the
JSON body or Server-Sent-Event chunks that carry it.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from dataclasses import dataclass
from typing import Any

from .protocol import CHAT_PATH, COMPLETIONS_PATH, WireReply, WireRequest, count_tokens, encoding

__all__ = ["Answer", "compose", "response_body", "stream_chunks"]


@dataclass
class Answer:
    """The decided completion of one request: text, finish reason, usage, tool call."""

    text: str
    finish_reason: str
    usage: dict
    tool: tuple[str, str] | None  # (call id, function name) when answering with a tool call
    task: str | None


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


def compose(request: WireRequest, reply: WireReply, cut_at: int | None) -> Answer:
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
    return Answer(text=text, finish_reason=finish, usage=usage, tool=tool, task=reply.task)


def _head(request: WireRequest, kind: str, model: str) -> dict:
    prefix = "chatcmpl" if request.path == CHAT_PATH else "cmpl"
    model = request.body.get("model") or model
    head = {"id": f"{prefix}-{uuid.uuid4().hex[:24]}", "object": kind}
    return {**head, "created": int(time.time()), "model": model, "system_fingerprint": None}


def response_body(request: WireRequest, answer: Answer, model: str) -> dict:
    if request.path == COMPLETIONS_PATH:
        choice: dict[str, Any] = {"text": answer.text, "index": 0, "logprobs": None}
        head = _head(request, "text_completion", model)
    else:
        message: dict[str, Any] = {"role": "assistant", "content": answer.text, "refusal": None}
        if answer.tool is not None:
            function = {"name": answer.tool[1], "arguments": answer.text}
            call = {"id": answer.tool[0], "type": "function", "function": function}
            message.update(content=None, tool_calls=[call])
        choice = {"index": 0, "message": message, "logprobs": None}
        head = _head(request, "chat.completion", model)
    choice["finish_reason"] = answer.finish_reason
    return {**head, "choices": [choice], "usage": answer.usage}


def stream_chunks(request: WireRequest, answer: Answer, model: str) -> list[dict]:
    """The stream's chunks, all made up front (the reply is already decided)."""
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
