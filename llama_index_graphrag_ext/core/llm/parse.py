"""Reading LLM replies the way real models write them.

Models wrap what was asked for in prose, code fences and reasoning blocks; each
reader here returns what was asked for or says plainly that it is not there.
"""

from __future__ import annotations

import json
import re
from typing import Any, TypeVar

import json_repair
from pydantic import BaseModel, TypeAdapter, ValidationError

__all__ = [
    "LLMOutputError",
    "find_items",
    "is_refusal",
    "is_unanswered",
    "json_candidates",
    "parse_answer",
    "parse_json",
    "parse_yes_no",
    "strip_label",
    "strip_reasoning",
    "validate_reply",
]

M = TypeVar("M", bound=BaseModel)


class LLMOutputError(ValueError):
    """An LLM reply that does not hold what was asked for (``raw``: the reply, for logs)."""

    def __init__(self, message: str, raw: str | None = None) -> None:
        super().__init__(message)
        self.raw = raw

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (str(self), self.raw))


REASONING_TAGS = ("think", "thinking", "reasoning", "reflection")
_CLOSED_BLOCK = re.compile(
    r"<(" + "|".join(REASONING_TAGS) + r")>.*?</\1>\s*", re.IGNORECASE | re.DOTALL
)
_OPEN_BLOCK = re.compile(r"^\s*<(" + "|".join(REASONING_TAGS) + r")>", re.IGNORECASE)
_STRAY_CLOSE = re.compile(r"^.*?</(" + "|".join(REASONING_TAGS) + r")>\s*", re.DOTALL)


def strip_reasoning(text: str) -> str:
    """The reply without its reasoning blocks.

    A block left open at the start means the reply was cut before its answer
    (``""``); a closing tag with no opening one (servers that strip the opening
    tag) ends the reasoning.
    """
    text = text or ""
    text = _CLOSED_BLOCK.sub("", text)
    if _OPEN_BLOCK.match(text):
        return ""
    if re.search(r"</(" + "|".join(REASONING_TAGS) + r")>", text, re.IGNORECASE):
        text = _STRAY_CLOSE.sub("", text, count=1)
    return text.strip()


_FENCE = re.compile(r"```[ \t]*[A-Za-z0-9_+-]*[ \t]*\n?(.*?)(?:```|\Z)", re.DOTALL)


def _strict(text: str) -> tuple[bool, Any]:
    try:
        return True, json.loads(text)
    except (ValueError, RecursionError):
        return False, None


def _repaired(text: str) -> list[Any]:
    """json-repair's reading of ``text`` from its first bracket: one value, or several."""
    starts = [i for i in (text.find("{"), text.find("[")) if i >= 0]
    if not starts:
        return []
    start = min(starts)
    try:
        value = json_repair.loads(text[start:])
    except (ValueError, RecursionError):  # nesting too deep to repair: no JSON
        return []
    if value in ("", None):
        return []
    # json-repair returns several top-level values as one list ("{...} and {...}");
    # a brace that opens no object ("still {not json") is prose, not JSON.
    if text[start] == "{" and not (
        isinstance(value, dict)
        or (isinstance(value, list) and value and all(isinstance(v, dict) for v in value))
    ):
        return []
    return [value]


def _concatenated(text: str) -> list[Any] | None:
    """Several JSON values one after another, from the first bracket.

    Read before json-repair, which keeps only the last of objects with the same keys.
    """
    starts = [i for i in (text.find("{"), text.find("[")) if i >= 0]
    if not starts:
        return None
    decoder, values, i = json.JSONDecoder(), [], min(starts)
    while i < len(text):
        try:
            value, i = decoder.raw_decode(text, i)
        except (ValueError, RecursionError):
            break
        values.append(value)
        while i < len(text) and text[i] in " \t\r\n,":
            i += 1
    return values if len(values) > 1 else None


def _loose(text: str) -> list[Any]:
    several = _concatenated(text)
    return [several] if several is not None else _repaired(text)


def json_candidates(text: str) -> list[Any]:
    """The JSON values a reply may hold, the likeliest first (may be empty).

    Order: fenced blocks (strictly parsed, then repaired), the whole reply
    strictly parsed, then json-repair's reading from the first bracket; when
    that reading is a list, its elements follow it (a reply with two objects
    in prose comes back as a list of both).
    """
    body = strip_reasoning(text)
    out: list[Any] = []
    fenced = [m.group(1).strip() for m in _FENCE.finditer(body) if m.group(1).strip()]
    for block in fenced:
        ok, value = _strict(block)
        out.extend([value] if ok else _loose(block))
    ok, value = _strict(body.strip())
    if ok:
        out.append(value)
    if not out:
        out.extend(_loose(body))
    for value in list(out):
        if isinstance(value, list):
            out.extend(v for v in value if isinstance(v, (dict, list)))
    return out


def parse_json(text: str) -> Any:
    """The first JSON value of a reply (see :func:`json_candidates`).

    Raises:
        LLMOutputError: No JSON value in the reply.
    """
    found = json_candidates(text)
    if not found:
        clipped = " ".join((text or "").split())[:120]
        raise LLMOutputError(f"no JSON in the reply: {clipped!r}", raw=text)
    return found[0]


def _numeric_keys(value: dict) -> bool:
    keys = [str(k).strip().rstrip(".").lstrip("#") for k in value]
    return bool(keys) and all(k.isdigit() for k in keys)


def find_items(value: Any, *, depth: int = 2) -> list[Any] | None:
    """The list of items a JSON value holds, whatever wraps it.

    A list is itself; an object keyed by numbers gives its values in numeric
    order; an object with exactly one list-valued field (under any key) gives
    that list; one level of wrapping more is looked through
    (``{"result": {"pairs": [...]}}``). ``None`` when no list is there.
    """
    if isinstance(value, list):
        return value
    if not isinstance(value, dict) or depth < 0:
        return None
    if _numeric_keys(value):
        order = sorted(value, key=lambda k: int(str(k).strip().rstrip(".").lstrip("#")))
        return [value[k] for k in order]
    lists = [v for v in value.values() if isinstance(v, list)]
    if len(lists) == 1:
        return lists[0]
    if not lists:
        inner = [v for v in value.values() if isinstance(v, dict)]
        if len(inner) == 1:
            return find_items(inner[0], depth=depth - 1)
    return None


def list_field(model: type[BaseModel]) -> str | None:
    """The model's one field that is a list, if it has exactly one field."""
    fields = list(model.model_fields.items())
    if len(fields) != 1:
        return None
    name, info = fields[0]
    origin = getattr(info.annotation, "__origin__", None)
    return name if origin is list else None


def validate_reply(model: type[M], text: str) -> M:
    """Read a reply as ``model``: the first JSON candidate that validates wins.

    A model with a single list field also accepts the list on its own, in any
    wrapper :func:`find_items` sees through; failing that, items that do not
    validate are dropped, as long as one item does.

    Raises:
        LLMOutputError: Nothing in the reply validates.
    """
    candidates = json_candidates(text)
    field = list_field(model)
    last_error: Exception | None = None
    for value in candidates:
        try:
            return model.model_validate(value)
        except ValidationError as exc:
            last_error = exc
        if field is None:
            continue
        items = find_items(value)
        if items is None:
            continue
        try:
            return model.model_validate({field: items})
        except ValidationError as exc:
            last_error = exc
    for value in candidates if field is not None else ():
        kept = _valid_items(model, field, find_items(value))
        if kept:
            return model.model_validate({field: kept})
    clipped = " ".join(strip_reasoning(text).split())[:160]
    reason = "no JSON" if not candidates else f"no {model.__name__} ({_first_error(last_error)})"
    raise LLMOutputError(f"{reason} in the reply: {clipped!r}", raw=text)


def _valid_items(model: type[BaseModel], field: str, items: list[Any] | None) -> list[Any]:
    """The items of ``items`` that validate as the list field's item type."""
    args = getattr(model.model_fields[field].annotation, "__args__", ())
    if not items or len(args) != 1:
        return []
    adapter = TypeAdapter(args[0])
    kept = []
    for item in items:
        try:
            kept.append(adapter.validate_python(item))
        except ValidationError:
            continue
    return kept


def _first_error(exc: Exception | None) -> str:
    if isinstance(exc, ValidationError) and exc.errors():
        err = exc.errors()[0]
        return f"{'.'.join(map(str, err['loc']))}: {err['msg']}"
    return str(exc) if exc else "unknown shape"


_REFUSAL = re.compile(
    r"^\W*(?:(?:i'?m|i am) (?:sorry|afraid|unable|not able)|sorry\b|i apologi[sz]e"
    r"|i (?:cannot|can't|can not|won't|will not|am not able to|must decline)"
    r"|unfortunately,? i|as an ai\b)",
    re.IGNORECASE,
)


def is_refusal(text: str) -> bool:
    """Whether a reply opens by declining the task ("I'm sorry, but I can't ...")."""
    return bool(_REFUSAL.match(strip_reasoning(text).replace("\u2019", "'")))


_LABEL = re.compile(
    r"^\s*(?:\*\*|__)?\s*(?:final answer|short answer|answer|rewritten(?: sub-?question| question)?"
    r"|sub-?question|question|reply|response|summary|output|result)\s*(?:\*\*|__)?\s*[:\uff1a]"
    r"\s*(?:\*\*|__)?\s*",
    re.IGNORECASE,
)


def strip_label(line: str) -> str:
    """A line without a leading label such as ``Answer:`` or ``**Rewritten question:**``."""
    previous = None
    while previous != line:
        previous, line = line, _LABEL.sub("", line, count=1)
    return line.strip()


_QUESTION_LABEL = re.compile(r"^\s*(?:\*\*|__)?\s*(?:sub-?)?question\b", re.IGNORECASE)
_FINAL_LABEL = re.compile(r"^\s*(?:\*\*|__)?\s*final answer\b", re.IGNORECASE)


def parse_answer(text: str) -> str:
    """A short answer: reasoning dropped, the answer's line preferred, quotes and labels removed.

    The first line labelled as an answer wins (a small model that goes on with
    "Question: ... Answer: ..." does not replace it), unless a "Final answer:"
    follows; without a label, the first non-empty line.
    """
    lines = [ln.strip() for ln in strip_reasoning(text).splitlines() if ln.strip()]
    labelled = [
        ln for ln in lines if _LABEL.match(ln) and not _QUESTION_LABEL.match(ln) and strip_label(ln)
    ]
    final = [ln for ln in labelled if _FINAL_LABEL.match(ln)]
    chosen = final[-1] if final else labelled[0] if labelled else lines[0] if lines else ""
    return strip_label(chosen).strip().strip('"\u201c\u201d').strip("*").strip()


_YES = {"yes", "yeah", "yep", "true", "sufficient", "correct", "y"}
_NO = {"no", "nope", "false", "insufficient", "n"}
_NEGATED = re.compile(
    r"\b(?:not (?:enough|sufficient|answerable|possible)|cannot be answered|can't be answered"
    r"|does not (?:contain|provide|answer|mention)|doesn't (?:contain|provide|answer|mention)"
    r"|insufficient|no information)\b",
    re.IGNORECASE,
)
_AFFIRMED = re.compile(
    r"\b(?:is sufficient|are sufficient|can be answered|contains the answer|is enough|are enough)\b",
    re.IGNORECASE,
)
_NEGATED_YES = re.compile(
    r"(?:\bnot|n['\u2019]t|\bnever)\s+(?:\w+\s+)?(?:yes|true|sufficient|correct|enough)\b"
)
_WORD = re.compile(r"[a-z]+")


def parse_yes_no(text: str) -> bool | None:
    """A yes/no reply as a boolean; ``None`` when it says neither.

    The first "yes" or "no" word decides; failing one, phrases such as "is
    sufficient" or "does not contain" do.
    """
    body = strip_reasoning(text)
    # "is not sufficient", "isn't correct": a negated yes-word is a no.
    for word in _WORD.findall(_NEGATED_YES.sub(" no ", body.lower())):
        if word in _YES:
            return True
        if word in _NO:
            return False
    if _NEGATED.search(body):
        return False
    if _AFFIRMED.search(body):
        return True
    return None


_UNANSWERED = re.compile(
    r"^\s*(?:unknown|none|n/?a|no answer|not (?:specified|mentioned|given|stated|provided|known"
    r"|available|found|clear)|unanswerable|unable to (?:answer|determine|tell|find)"
    r"|(?:i )?(?:do not|don't|cannot|can't|could not|couldn't) (?:know|answer|determine|tell|find"
    r"|say)|(?:the )?(?:context|passages?|text|information|documents?) (?:does|do) not"
    r"|there is no|insufficient|not enough information|no (?:information|relevant)"
    r"|cannot be determined|it is not (?:clear|specified|mentioned|stated))\b",
    re.IGNORECASE,
)


def is_unanswered(answer: str) -> bool:
    """Whether a short answer says it could not answer ("I don't know", "Not specified", ...)."""
    body = parse_answer(answer) if answer else ""
    return not body.strip() or bool(_UNANSWERED.match(body))
