"""ChainRAG's prompts (our wording; the paper shows only the decomposition guidelines, Fig. 8)."""

from __future__ import annotations

import re

from llama_index.core.prompts import PromptTemplate

#: §3.2 / App. D: split a multi-hop question into minimal sub-questions (JSON array).
DECOMPOSE_PROMPT = PromptTemplate(
    "Split the question below into the fewest sub-questions needed to answer it, "
    "usually two at most.\n"
    "- Split only when the answer needs several separate facts to be found and connected.\n"
    "- Each sub-question asks for one essential fact; no overlaps.\n"
    "- Chains: a later sub-question may build on an earlier answer "
    '(e.g. "Who directed Jaws?" then "Where was this director born?").\n'
    "- Comparisons: ask for the compared attribute of each item separately.\n"
    "- A single-fact question stays as it is.\n"
    'Reply with a JSON array of strings only, e.g. ["first sub-question", "second sub-question"].\n'
    "Question: {query_str}\n"
    "JSON:"
)

#: §3.3 entity completion: make a sub-question self-contained from earlier answers.
REWRITE_PROMPT = PromptTemplate(
    "Earlier sub-questions and their answers:\n{history_str}\n\n"
    "The next sub-question refers to something from above with a pronoun or a phrase "
    'such as "this author". Rewrite it so that it names that entity explicitly. '
    "Reply with the rewritten question only.\n"
    "Sub-question: {query_str}\n"
    "Rewritten:"
)

#: §3.3: when an earlier sub-question went unanswered, summarise its context instead.
SUMMARY_PROMPT = PromptTemplate(
    'Sentences retrieved for the question "{question}":\n{context_str}\n\n'
    "Summarise in two or three sentences what these sentences say that could help "
    "answer related questions. Reply with the summary only.\n"
    "Summary:"
)

#: §3.2: after each expansion, does the gathered context answer the sub-question?
#: (Read by ``core.llm.parse_yes_no``: "Based on the context, yes." is yes.)
SUFFICIENCY_PROMPT = PromptTemplate(
    "Context:\n{context_str}\n\n"
    "Can the question be answered from the context above alone? Reply yes or no.\n"
    "Question: {query_str}\n"
    "Reply:"
)

#: §3.2: answer one sub-question from its sentences.
SUBANSWER_PROMPT = PromptTemplate(
    "Context:\n{context_str}\n\n"
    "Answer the question from the context in as few words as possible. If the context "
    'does not contain the answer, reply "unknown".\n'
    "Question: {query_str}\n"
    "Answer:"
)

#: §3.4 sub-answer integration (AnsInt): the sub-questions and answers only.
ANSWER_INTEGRATION_PROMPT = PromptTemplate(
    "Sub-questions and their answers:\n{chain_str}\n\n"
    "Using them, answer the original question in as few words as possible.\n"
    "Question: {query_str}\n"
    "Answer:"
)

#: §3.4 sub-context integration (CxtInt): the merged, reranked sentences.
CONTEXT_INTEGRATION_PROMPT = PromptTemplate(
    "Context:\n{context_str}\n\n"
    "Answer the question from the context in as few words as possible.\n"
    "Question: {query_str}\n"
    "Answer:"
)

#: §3.3: words that signal a missing key entity (pronouns and demonstratives).
REFERENCE_WORDS = frozenset(
    {
        "this", "that", "these", "those", "it", "its", "they", "them", "their",
        "he", "him", "his", "she", "her", "hers", "former", "latter", "aforementioned",
    }
)  # fmt: skip

_WORD = re.compile(r"[a-z]+")


def missing_entity(question: str, words: frozenset[str] = REFERENCE_WORDS) -> list[str]:
    """The reference words in a sub-question (whole words, case-insensitive).

    Unlike the authors' substring test (§3.3), "the" and words merely containing a
    pronoun ("item", "theory") do not count.
    """
    return [w for w in _WORD.findall(question.lower()) if w in words]
