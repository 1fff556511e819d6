"""Prompts of QCG-RAG (our wording; the paper's Appendix C gives the intent)."""

from __future__ import annotations

from llama_index.core.prompts import PromptTemplate

DOC2QUERY_PROMPT = PromptTemplate(
    "You write search questions for a retrieval index.\n"
    "Read the passage below and write {num_pairs} different questions that the "
    "passage itself answers, each with its short answer.\n"
    "Rules:\n"
    "- Every question must be answerable from the passage alone.\n"
    "- Together the questions should cover every fact in the passage: names, "
    "dates, places, numbers, causes, results, and the passage's overall subject.\n"
    "- Vary the form (who / what / when / where / why / how / yes-no / list / "
    "compare) and the level of detail; no two questions may ask the same thing.\n"
    "- Name the people, places and things explicitly; never write vague "
    'questions such as "What did he say?".\n'
    "- The answer is a short phrase copied (or nearly copied) from the passage.\n"
    "Passage:\n"
    '"""\n'
    "{chunk}\n"
    '"""\n'
    'Reply with a JSON array only, one object per question: [{"query": "...", '
    '"answer": "..."}, ...]\n'
)
"""Extended Doc2Query (§3.3, Prompt C.1), JSON output; variables ``num_pairs`` and ``chunk``."""

DOC2QUERY_LINES_PROMPT = PromptTemplate(
    "Write {num_pairs} questions that this passage answers, each followed by its "
    "short answer from the passage.\n"
    "Passage:\n"
    "{chunk}\n\n"
    "Use exactly this format, one pair per line:\n"
    "Q: <question> A: <answer>\n"
)
"""The same for small models that cannot keep JSON well-formed (line output)."""

DOC2QUERY_REPAIR_NOTE = (
    "\n\nYour previous reply could not be read as question-answer pairs. Reply "
    "again with the pairs only, in the format asked for above."
)
"""Appended to the generation prompt when an answer could not be parsed."""

QCG_ANSWER_PROMPT = PromptTemplate(
    "Retrieved passages:\n"
    "---------------------\n"
    "{context_str}\n"
    "---------------------\n"
    "Answer the question using only the passages above. If they do not contain "
    "the answer, say that you do not know; do not invent facts.\n"
    "Question: {query_str}\n"
    "Answer: "
)
"""The answer step (§3.4 step 4, Prompt C.2), a ``text_qa_template``."""
