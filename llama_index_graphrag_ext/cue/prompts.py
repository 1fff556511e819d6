"""Prompts of CUE-RAG, written for this package (the paper's Fig. 7 and Fig. 8 describe them)."""

from __future__ import annotations

from llama_index.core.prompts import PromptTemplate, PromptType

UNIT_EXTRACTION_TMPL = """\
Rewrite the passage below as a list of knowledge units. A knowledge unit is one \
short, self-contained statement of a single fact that a reader understands \
without seeing the passage.

Rules:
1. Split compound sentences into simple ones; keep the passage's own wording \
where you can.
2. When a named thing comes with a description, state the description as its \
own unit.
3. Never use pronouns or vague references ("he", "it", "they", "this club"): \
write the full name each time, e.g. "Marie Curie's husband" instead of "her husband".
4. Keep every fact of the passage, including dates and numbers; add nothing new.

Answer with JSON only, in this shape:
{"units": ["first unit", "second unit"]}

Example passage:
Lake Bled. It lies in the Julian Alps and its island holds a pilgrimage church \
built in the 17th century.
Example answer:
{"units": ["Lake Bled lies in the Julian Alps.", "Lake Bled has an island.", \
"The island of Lake Bled holds a pilgrimage church.", \
"The pilgrimage church on the island of Lake Bled was built in the 17th century."]}

Passage:
{passage}
Answer:
"""

UNIT_EXTRACTION_PROMPT = PromptTemplate(UNIT_EXTRACTION_TMPL, prompt_type=PromptType.CUSTOM)
"""Knowledge-unit extraction (Alg. 1, line 8; Fig. 7), JSON out (variables: ``passage``)."""

QUERY_ENTITY_TMPL = """\
List the named entities (people, places, organisations, works, events, dates) \
mentioned in the question. Answer with JSON only: {"entities": ["...", "..."]}

Question: Which river flows through the capital of the country where Nokia was founded?
Answer: {"entities": ["Nokia"]}

Question: {query}
Answer:
"""

QUERY_ENTITY_PROMPT = PromptTemplate(QUERY_ENTITY_TMPL, prompt_type=PromptType.CUSTOM)
"""Query entities for Spreading Activation (§3.3; the paper shows no prompt; ``query``)."""

CUE_ANSWER_TMPL = """\
Answer the question from the context below.

Context:
{context_str}

Question: {query_str}
Answer the question in as few words as possible.
Question: {query_str}
Answer:
"""

CUE_ANSWER_PROMPT = PromptTemplate(CUE_ANSWER_TMPL, prompt_type=PromptType.QUESTION_ANSWER)
"""The answer (§4.1, Fig. 8; the question repeated after the context as §4.1 says)."""
