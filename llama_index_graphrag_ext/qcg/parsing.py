"""Question-answer pairs as models write them (paper §3.3, indexing step 1).

:class:`QAPairs` is the structured output asked of capable LLMs. :func:`parse_pairs`
reads text replies: JSON in any realistic shape (objects or ``[query, answer]`` lists,
wrapped, numbered, fenced, slightly broken; see :mod:`...core.llm.parse`), or lines
(``Q: ... A: ...``, ``Q:``/``A:`` on consecutive lines, ``1. Who ...? Answer``).
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import AliasChoices, BaseModel, Field, model_validator

from ..core.llm import LLMOutputError, parse_list, strip_reasoning, validate_reply


class QAPair(BaseModel):
    """One generated question and its short answer."""

    query: str = Field(
        description="A question the passage answers.",
        validation_alias=AliasChoices("query", "question", "q"),
    )
    answer: str = Field(
        default="",
        description="Its short answer, taken from the passage.",
        validation_alias=AliasChoices("answer", "a", "response"),
    )

    @model_validator(mode="before")
    @classmethod
    def _from_other_shapes(cls, value: Any) -> Any:
        # ["question", "answer"] lists and "Question? Answer" strings.
        if isinstance(value, (list, tuple)) and value and isinstance(value[0], str):
            return {"query": value[0], "answer": value[1] if len(value) > 1 else ""}
        if isinstance(value, str):
            split = _split_question(value)
            return {"query": split[0], "answer": split[1]} if split else {"query": ""}
        if isinstance(value, dict):  # keys in any case: "Question", "A", "QUERY"
            return {str(k).strip().lower(): v for k, v in value.items()}
        return value


class QAPairs(BaseModel):
    """The Doc2Query output: question-answer pairs grounded in one passage."""

    pairs: list[QAPair] = Field(description="The question-answer pairs.")


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


def _split_question(line: str) -> tuple[str, str] | None:
    """``"Who wrote X? Jane Doe"`` -> ``("Who wrote X?", "Jane Doe")``."""
    line = _clean(line)
    if not line:
        return None
    cut = line.find("?")
    if cut == -1:
        return line, ""
    return line[: cut + 1].strip(), line[cut + 1 :].strip(" -:|").strip()


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
    items = [i for i in parse_list(text) if "?" in i]
    return [p for p in (_split_question(i) for i in items) if p]


def parse_pairs(text: str) -> list[tuple[str, str]]:
    """Generator output as ``(query, answer)`` pairs, in order, without duplicates.

    Pairs with an empty query are dropped; an empty answer is kept (the node then
    holds the query alone). ``[]`` when nothing usable was found.
    """
    text = strip_reasoning(text or "")
    if not text.strip():
        return []
    pairs: list[tuple[str, str]] = []
    if re.search(r"[\[{]", text):
        try:
            pairs = [(p.query, p.answer) for p in validate_reply(QAPairs, text).pairs]
        except LLMOutputError:
            pairs = []
    if not pairs:
        pairs = _from_lines(text)
    return dedupe_pairs(pairs)


def dedupe_pairs(pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Pairs cleaned (list numbers, quotes), without empty or repeated queries."""
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
