"""Tolerant parsing of generated question-answer pairs (paper §3.3, indexing step 1).

Generators answer in many shapes. :func:`parse_pairs` accepts

* a JSON array of objects (``query``/``question``/``q`` and ``answer``/``a`` keys),
  possibly wrapped in an object (``{"pairs": [...]}``), fenced, or slightly broken
  (repaired by :func:`~llama_index_graphrag_ext.core.llm.parse_json_lenient`);
* a JSON array of ``[query, answer]`` lists;
* line formats: ``Q: ... A: ...`` on one line, ``Q:``/``A:`` on consecutive
  lines, or numbered questions ``1. Who ...? Answer`` split at the question mark.

Duplicates (same normalised query) are dropped; :func:`normalize_query` says
what counts as the same.
"""

from __future__ import annotations

import re
from typing import Any

from ..core.llm import LLMOutputError, parse_json_lenient, parse_numbered_lines

_QUERY_KEYS = ("query", "question", "q")
_ANSWER_KEYS = ("answer", "a", "response")
_CONTAINER_KEYS = ("pairs", "queries", "questions", "items", "data", "results", "output")
_QA_INLINE = re.compile(
    r"^\s*(?:\d+\s*[.)]\s*)?(?:\*\*)?(?:q(?:uery|uestion)?)\s*\d*\s*[:.)-]\s*(?:\*\*)?\s*(?P<q>.+?)"
    r"\s*(?:\||;|\s)\s*(?:\*\*)?a(?:nswer)?\s*\d*\s*[:.)-]\s*(?:\*\*)?\s*(?P<a>.+?)\s*$",
    re.IGNORECASE,
)
_Q_LINE = re.compile(
    r"^\s*(?:\d+\s*[.)]\s*)?(?:\*\*)?q(?:uery|uestion)?\s*\d*\s*[:.)-]\s*(?:\*\*)?\s*(?P<t>.+)$",
    re.IGNORECASE,
)
_A_LINE = re.compile(
    r"^\s*(?:\*\*)?a(?:nswer)?\s*\d*\s*[:.)-]\s*(?:\*\*)?\s*(?P<t>.+)$", re.IGNORECASE
)
_SPACES = re.compile(r"\s+")
_OTHER_LETTER = re.compile(r"^\s*[A-Za-z]\s*[:)]\s")


def normalize_query(text: str) -> str:
    """Lower-cased text without punctuation or extra spaces (the duplicate key)."""
    return _SPACES.sub(" ", re.sub(r"[^\w\s]", " ", text.lower())).strip()


def _clean(text: Any) -> str:
    if text is None:
        return ""
    return _SPACES.sub(" ", str(text)).strip().strip('"').strip()


_LEADING_NUMBER = re.compile(r"^\s*(?:\d+\s*[.):]|\(\d+\)|#\d+:?)\s+")


def _clean_query(text: Any) -> str:
    """A query without a leading list number ("1. Who ..." -> "Who ...")."""
    return _LEADING_NUMBER.sub("", _clean(text))


def _pair_from_item(item: Any) -> tuple[str, str] | None:
    if isinstance(item, dict):
        lowered = {str(k).lower(): v for k, v in item.items()}
        query = next((lowered[k] for k in _QUERY_KEYS if k in lowered), None)
        answer = next((lowered[k] for k in _ANSWER_KEYS if k in lowered), "")
        if query is None:
            return None
        return _clean(query), _clean(answer)
    if isinstance(item, (list, tuple)) and 1 <= len(item) <= 3 and isinstance(item[0], str):
        return _clean(item[0]), _clean(item[1]) if len(item) > 1 else ""
    if isinstance(item, str):
        return _split_question(item)
    return None


def _split_question(line: str) -> tuple[str, str] | None:
    """``"Who wrote X? Jane Doe"`` -> ``("Who wrote X?", "Jane Doe")``."""
    line = _clean(line)
    if not line:
        return None
    cut = line.find("?")
    if cut == -1:
        return line, ""
    return line[: cut + 1].strip(), line[cut + 1 :].strip(" -:|").strip()


def _from_json(value: Any) -> list[tuple[str, str]] | None:
    if isinstance(value, dict):
        lowered = {str(k).lower(): v for k, v in value.items()}
        inner = next((lowered[k] for k in _CONTAINER_KEYS if k in lowered), None)
        if isinstance(inner, list):
            value = inner
        else:
            single = _pair_from_item(value)
            return [single] if single else None
    if not isinstance(value, list):
        return None
    pairs = [p for p in (_pair_from_item(item) for item in value) if p is not None]
    return pairs or None


def _from_lines(text: str) -> list[tuple[str, str]]:
    pairs: list[tuple[str, str]] = []
    pending: str | None = None
    saw_marker = False

    def flush() -> None:
        nonlocal pending
        if pending:
            pairs.append((pending, ""))
        pending = None

    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        inline = _QA_INLINE.match(line)
        if inline:
            flush()
            pairs.append((_clean(inline["q"]), _clean(inline["a"])))
            saw_marker = True
            continue
        q_line, a_line = _Q_LINE.match(line), _A_LINE.match(line)
        if not (q_line or a_line) and _OTHER_LETTER.match(line):
            continue  # "B: ...", "C) ...": neither a question nor an answer
        if q_line:
            flush()
            pending = _clean(q_line["t"])
            saw_marker = True
        elif a_line or (pending and saw_marker):
            # An "A:" line, or an unmarked line right after a question, answers it.
            answer = _clean_query(a_line["t"] if a_line else line)
            if answer.endswith("?"):  # small models write questions as answers
                flush()
                pending = answer
            elif pending:
                pairs.append((pending, answer))
                pending = None
    flush()
    if pairs:
        return pairs
    # Numbered or bulleted questions, the answer after the question mark; lines
    # without a question mark are prose ("Sure, here you go"), not queries.
    items = [i for i in parse_numbered_lines(text) if "?" in i]
    return [p for p in (_split_question(i) for i in items) if p]


def parse_pairs(text: str) -> list[tuple[str, str]]:
    """Parse generator output into ``(query, answer)`` pairs, duplicates dropped.

    Pairs with an empty query are dropped; an empty answer is kept (the node
    then holds the query alone). Order is preserved.

    Args:
        text: The raw model output.

    Returns:
        The pairs; ``[]`` when nothing usable was found.
    """
    if not text or not text.strip():
        return []
    pairs: list[tuple[str, str]] | None = None
    if re.search(r"[\[{]", text):
        try:
            pairs = _from_json(parse_json_lenient(text))
        except LLMOutputError:
            pairs = None
    if not pairs:
        pairs = _from_lines(text)
    seen: set[str] = set()
    out: list[tuple[str, str]] = []
    for query, answer in pairs:
        query, answer = _clean_query(query), _clean_query(answer)
        key = normalize_query(query)
        if not key or key in seen or len(key) < 3:
            continue
        seen.add(key)
        out.append((query, answer))
    return out
