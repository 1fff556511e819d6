"""Line lists and free text as chat models write them: an item is content.

A list reply may be numbered, bulleted, bracketed, one item per line or a JSON
array, and comes wrapped in chat ("Here are the statements:", "I hope this
helps!", code fences); free text (summaries, answers) comes with the same chat
around it. What is read here is only what was asked for.
"""

from __future__ import annotations

import re

from .parse import _FENCE, find_items, is_refusal, json_candidates, strip_reasoning

__all__ = ["MAX_ITEM_CHARS", "is_degenerate", "parse_list", "strip_chatter"]

_LIST_MARKER = re.compile(
    r"""^(?:
        \(\s*\d+\s*\)\s*             # (2) foo
      | \[\s*\d+\s*\]\s*             # [2] foo
      | \d+\s*[.):\]](?:\s+|\Z)      # 1. foo   1) foo   1: foo
      | [-*+\u2022\u2013](?:\s+|\Z)  # - foo   * foo   bullet   en dash
    )""",
    re.VERBOSE,
)
_WRAPPED = re.compile(r"^\[(.+)\]$")
_ITEM_WRAPPERS = (('"', '"'), ("'", "'"), ("\u201c", "\u201d"), ("**", "**"), ("`", "`"))


def _unwrap(item: str) -> str:
    for left, right in _ITEM_WRAPPERS:
        if len(item) > len(left) + len(right) and item.startswith(left) and item.endswith(right):
            return item[len(left) : -len(right)].strip()
    return item


# Lines around a list that are not items: "Here are the statements:", "Sure! Below
# are five questions:", and after it "I hope this helps!", "Let me know if ...".
_PREAMBLE = re.compile(
    r"^\W*(?:(?:sure|certainly|of course|okay|ok|alright|absolutely|great|no problem)\s*[,.!:]"
    r"|here(?:'s| is| are)\b|below (?:is|are)\b|(?:the following|i (?:have |'ve )?"
    r"(?:extracted|identified|listed|generated|written|found))\b.*:\s*$)",
    re.IGNORECASE,
)
_SIGN_OFF = re.compile(
    r"^\W*(?:i hope (?:this|that|these|it) helps?|hope (?:this|that|it) helps?"
    r"|(?:please )?let me know\b|feel free to\b|is there anything else\b"
    r"|if you (?:need|have|want|would like|'d like)\b|happy to help\b"
    r"|i can also\b|would you like\b|\(?note\s*:)",
    re.IGNORECASE,
)
_FENCE_LINE = re.compile(r"^```[\w+-]*\s*$")
#: Longer than any list item the suite asks for (statements, questions, names).
MAX_ITEM_CHARS = 1000


def is_degenerate(item: str) -> bool:
    """An item no model means: a repetition loop ("the the the ...", a phrase repeated to
    the length limit) or text far too long to be one item of a list."""
    if len(item) > MAX_ITEM_CHARS:
        return True
    words = item.lower().split()
    return len(words) >= 8 and len(set(words)) <= len(words) // 4


def _json_items(body: str) -> list[str] | None:
    """The items of a reply written as a JSON list (or an object holding one), when it is
    one: ``["a", "b"]``, a fenced array, one quoted element per line, a cut array."""
    fenced = [m.group(1).strip() for m in _FENCE.finditer(body) if m.group(1).strip()]
    head = (fenced[0] if fenced else body).lstrip()
    # '[statement]' lines are a bracketed list, not JSON: an array opens with a value.
    if not re.match(r"^(?:\[\s*[\"'{\d\]]|\{\s*\")", head):
        return None
    found = json_candidates(head)
    items = find_items(found[0]) if found else None
    if items is None:
        return None
    out = []
    for item in items:
        if isinstance(item, dict):
            texts = [v for v in item.values() if isinstance(v, str)]
            item = texts[0] if len(texts) == 1 else None
        if isinstance(item, (str, int, float)) and not isinstance(item, bool):
            out.append(str(item).strip())
    return [i for i in out if i]


def parse_list(text: str) -> list[str]:
    """Items of a list in a reply: numbered, bulleted, bracketed, one per line, or a JSON list.

    When any line is marked, unmarked lines are dropped; otherwise every
    non-empty line is an item, unless the reply is a refusal. Either way a
    preamble ("Here are the statements:") and a sign-off ("I hope this
    helps!") are not items, nor are code fences or repetition loops
    (:func:`is_degenerate`). Quotes, backticks or ``**`` around a whole item
    are removed.
    """
    body = strip_reasoning(text)
    as_json = _json_items(body)
    if as_json is not None:
        return [i for i in as_json if not is_degenerate(i)]
    lines: list[tuple[str, bool]] = []
    for line in body.splitlines():
        line = line.strip()
        if not line or _FENCE_LINE.match(line):
            continue
        marker = _LIST_MARKER.match(line)
        wrapped = _WRAPPED.match(line)
        if marker:
            item, marked = line[marker.end() :], True
        elif wrapped:
            item, marked = wrapped.group(1), True
        else:
            item, marked = line, False
        item = _unwrap(item.strip())
        if item:
            lines.append((item, marked))
    if any(marked for _, marked in lines):
        items = [item for item, marked in lines if marked]
    elif lines and is_refusal(lines[0][0]):
        return []
    else:
        items = [item for item, _ in lines]
        # An unmarked list: its leading lines that introduce it, and its closing remarks.
        while items and (_PREAMBLE.match(items[0]) or items[0].endswith(":")) and len(items) > 1:
            items.pop(0)
    while items and _SIGN_OFF.match(items[-1]):
        items.pop()
    if items and _PREAMBLE.match(items[0]) and items[0].rstrip().endswith((":", "!")):
        items.pop(0)  # "- Here are the entities:" marked like an item
    return [i for i in items if not is_degenerate(i)]


def strip_chatter(text: str) -> str:
    """A free-text reply (summary, description, answer) without the chat around it: a first
    line that introduces it ("Sure! Here is the summary:") and closing remarks ("Let me
    know if you need anything else."). Unchanged when nothing else would remain."""
    body = (text or "").strip()
    lines = [ln for ln in body.splitlines()]
    while len(lines) > 1 and not lines[0].strip():
        lines.pop(0)
    if len(lines) > 1 and _PREAMBLE.match(lines[0]) and lines[0].rstrip().endswith((":", "!")):
        lines.pop(0)
    kept = "\n".join(lines).strip()
    # Closing remarks: trailing lines, or trailing sentences of the last line.
    while True:
        parts = re.split(r"(?<=[.!?])\s+", kept)
        last_line = kept.splitlines()[-1] if kept else ""
        if kept.count("\n") and _SIGN_OFF.match(last_line.strip()):
            kept = kept[: kept.rfind(last_line)].rstrip()
        elif len(parts) > 1 and _SIGN_OFF.match(parts[-1]):
            kept = kept[: kept.rfind(parts[-1])].rstrip()
        else:
            break
    return kept or body
