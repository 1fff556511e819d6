"""Prompts shared by several methods and the runner (each method keeps its own in its folder)."""

from __future__ import annotations

from llama_index.core.prompts import PromptTemplate

#: Short grounded answer from retrieved passages: what multi-hop QA metrics expect.
SHORT_ANSWER_PROMPT = PromptTemplate(
    "Passages:\n"
    "---------------------\n"
    "{context_str}\n"
    "---------------------\n"
    "Use only the passages above. Reply with the answer alone, in a few words, "
    "without explanation.\n"
    "Question: {query_str}\n"
    "Answer: "
)
