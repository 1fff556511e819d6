"""Routing: summarization questions to FG-RAG, factoid questions to a retrieval method.

Adds to LlamaIndex's ``RouterQueryEngine`` an LLM-free selector
(:class:`QuestionTypeSelector`) and :func:`build_router`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from llama_index.core.base.base_query_engine import BaseQueryEngine
from llama_index.core.base.base_selector import (
    BaseSelector,
    SelectorResult,
    SingleSelection,
)
from llama_index.core.llms import LLM, MockLLM
from llama_index.core.prompts.mixin import PromptDictType
from llama_index.core.query_engine import RouterQueryEngine
from llama_index.core.schema import QueryBundle
from llama_index.core.selectors import LLMSingleSelector
from llama_index.core.tools import QueryEngineTool, ToolMetadata

QuestionKind = Literal["summary", "factoid"]

# Query-focused summarization questions ask about the whole collection, about
# abstractions, and open with "how" or "in what ways"; factoid multi-hop questions
# open with who/when/where/which, ask for a named attribute and name things.

_SUMMARY_RULES: tuple[tuple[str, float, re.Pattern[str]], ...] = (
    (
        "mentions the collection",
        2.0,
        re.compile(
            r"\b(dataset|corpus|collection|(the|these|different|each|certain) "
            r"(texts?|passages?|stories|story|narratives?|documents?|articles?|authors))\b",
            re.I,
        ),
    ),
    (
        "spans the collection",
        1.0,
        re.compile(r"\b(across|throughout|overall|in general|as a whole|recurring)\b", re.I),
    ),
    (
        "asks about abstractions",
        1.0,
        re.compile(
            r"\b(themes?|thematic|patterns?|trends?|roles?|impacts?|influences?|implications?|"
            r"significance|perspectives?|approaches|strategies|insights?|lessons?|dynamics|"
            r"interplay|representations?|portrayals?|depict\w*|evolv\w*|evolution|"
            r"relationships?|contexts?|values|norms|identity|identities|frameworks?|"
            r"challenges|ways|summar\w+|overview|main ideas|key points)\b",
            re.I,
        ),
    ),
    (
        "opens an open question",
        1.0,
        re.compile(
            r"^\s*(how (do|does|did|can|could|might|should|are|is|were|was|significant)|"
            r"in what ways?|to what extent|why|what (role|roles|impact|patterns?|themes?|"
            r"lessons?|insights?|strategies|key|major|core|are the main)|discuss|describe|"
            r"explain|summari[sz]e|compare|analy[sz]e)\b",
            re.I,
        ),
    ),
)
_FACTOID_RULES: tuple[tuple[str, float, re.Pattern[str]], ...] = (
    (
        "opens a factoid question",
        2.0,
        re.compile(
            r"^\s*(who|whom|whose|when|where|which|how (many|much|old|long|far)|"
            r"in (what|which) (year|city|country|state|place|language)|"
            r"(is|are|was|were|do|does|did|has|have) (both|the|there|\w+ or)|"
            r"what (is|was|are|were) the (name|date|year|capital|population|"
            r"place|nationality|currency|language|country|city))\b",
            re.I,
        ),
    ),
    (
        "asks for a named attribute",
        1.0,
        re.compile(
            r"\b(place of (birth|death)|date of (birth|death)|born|died|founded|"
            r"director of|father of|mother of|spouse|husband|wife|child of|"
            r"capital of|located|nationality|citizen|founder|"
            r"the first|the last|the same (country|nationality)|first president)\b",
            re.I,
        ),
    ),
    ("names a year or number", 1.0, re.compile(r"\b\d{2,4}\b")),
)
# Capitalised words after the first one: names of people, places, works.
_NAME = re.compile(r"(?<!^)(?<![.?!]\s)\b[A-Z][\w'’\-]*")
_NOT_NAMES = frozenset({"I", "The", "A", "An", "In", "Of", "And", "Or"})


@dataclass(frozen=True)
class QuestionType:
    """What :func:`classify_question` decided, and why.

    Attributes:
        score: Summary evidence minus factoid evidence (``>= threshold``: summary).
        reasons: The rules that fired, with their signed weights.
    """

    kind: QuestionKind
    score: float
    reasons: list[str] = field(default_factory=list)


def classify_question(question: str, *, threshold: float = 1.0) -> QuestionType:
    """Tell a query-focused summarization question from a factoid one, without an LLM.

    Weighted rules add up: the collection, abstractions and open questions
    count for summary; factoid openings, named attributes, numbers and names
    (-0.5 each, at most -3) against. A total ``>= threshold`` means summary.

    Raises:
        ValueError: Empty question.
    """
    if not question or not question.strip():
        raise ValueError("cannot classify an empty question")
    text = question.strip()
    score = 0.0
    reasons: list[str] = []
    for name, weight, pattern in _SUMMARY_RULES:
        if pattern.search(text):
            score += weight
            reasons.append(f"+{weight:g} {name}")
    for name, weight, pattern in _FACTOID_RULES:
        if pattern.search(text):
            score -= weight
            reasons.append(f"-{weight:g} {name}")
    names = [w for w in _NAME.findall(text) if w not in _NOT_NAMES]
    if names:
        penalty = min(0.5 * len(names), 3.0)
        score -= penalty
        reasons.append(f"-{penalty:g} names ({', '.join(names[:4])})")
    kind: QuestionKind = "summary" if score >= threshold else "factoid"
    return QuestionType(kind=kind, score=score, reasons=reasons)


def _find(choices: Sequence[ToolMetadata], wanted: str | int, role: str) -> int:
    if isinstance(wanted, int):
        if not 0 <= wanted < len(choices):
            raise ValueError(f"{role} choice {wanted} is out of range for {len(choices)} choices")
        return wanted
    for i, choice in enumerate(choices):
        if choice.name == wanted:
            return i
    names = [c.name for c in choices]
    raise ValueError(f"no {role} choice named {wanted!r} among {names}")


class QuestionTypeSelector(BaseSelector):
    """An LLM-free selector: summarization questions to one choice, factoid ones to another.

    Each selection's reason lists the :func:`classify_question` rules that
    fired. Choices are tool names or indexes.
    """

    def __init__(
        self,
        summary_choice: str | int = 0,
        factoid_choice: str | int = 1,
        threshold: float = 1.0,
    ) -> None:
        self.summary_choice = summary_choice
        self.factoid_choice = factoid_choice
        self.threshold = threshold

    def _get_prompts(self) -> PromptDictType:
        return {}  # rules, not prompts

    def _update_prompts(self, prompts: PromptDictType) -> None:
        return None

    def _select(self, choices: Sequence[ToolMetadata], query: QueryBundle) -> SelectorResult:
        decision = classify_question(query.query_str, threshold=self.threshold)
        wanted = self.summary_choice if decision.kind == "summary" else self.factoid_choice
        index = _find(choices, wanted, decision.kind)
        reason = f"{decision.kind} question (score {decision.score:g}: {'; '.join(decision.reasons) or 'no rule fired'})"
        return SelectorResult(selections=[SingleSelection(index=index, reason=reason)])

    async def _aselect(self, choices: Sequence[ToolMetadata], query: QueryBundle) -> SelectorResult:
        return self._select(choices, query)


#: Tool descriptions the LLM selector reads (and users can replace).
SUMMARY_DESCRIPTION = (
    "Useful for broad, query-focused summarization questions about the whole "
    "collection: main themes, patterns, roles, comparisons across documents."
)
FACTOID_DESCRIPTION = (
    "Useful for specific factual questions with a short answer, including multi-hop "
    "questions that chain facts about named people, places, works or dates."
)


def build_router(
    summary_engine: BaseQueryEngine,
    factoid_engine: BaseQueryEngine,
    *,
    selector: Literal["heuristic", "llm"] | BaseSelector = "heuristic",
    llm: LLM | None = None,
    summary_description: str = SUMMARY_DESCRIPTION,
    factoid_description: str = FACTOID_DESCRIPTION,
    verbose: bool = False,
) -> RouterQueryEngine:
    """A ``RouterQueryEngine`` over a summarization engine and a factoid engine.

    Args:
        summary_engine: For query-focused summarization; tool name ``summary``.
        factoid_engine: For factoid questions; tool name ``factoid``.
        selector: ``heuristic`` (:class:`QuestionTypeSelector`), ``llm``
            (LlamaIndex's ``LLMSingleSelector``) or any ``BaseSelector``.
        llm: The selector's LLM (required for ``llm``); without one an inert LLM
            keeps the router from resolving ``Settings.llm``.

    Returns:
        The router; ``metadata["selector_result"]`` says which engine answered and why.

    Raises:
        ValueError: ``selector="llm"`` without ``llm``, or an unknown selector.
    """
    tools = [
        QueryEngineTool(
            query_engine=summary_engine,
            metadata=ToolMetadata(name="summary", description=summary_description),
        ),
        QueryEngineTool(
            query_engine=factoid_engine,
            metadata=ToolMetadata(name="factoid", description=factoid_description),
        ),
    ]
    if isinstance(selector, BaseSelector):
        chosen = selector
    elif selector == "heuristic":
        chosen = QuestionTypeSelector("summary", "factoid")
    elif selector == "llm":
        if llm is None:
            raise ValueError('selector="llm" needs llm=')
        chosen = LLMSingleSelector.from_defaults(llm=llm)
    else:
        raise ValueError(f"selector must be 'heuristic', 'llm' or a BaseSelector, got {selector!r}")
    return RouterQueryEngine(
        selector=chosen,
        query_engine_tools=tools,
        llm=llm if llm is not None else MockLLM(),
        verbose=verbose,
    )
