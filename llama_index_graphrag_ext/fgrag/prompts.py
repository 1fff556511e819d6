"""FG-RAG prompts (written for this package; the paper's figures give their structure).

The components that use them expose them through ``PromptMixin`` (``update_prompts``).
"""

from __future__ import annotations

from llama_index.core.prompts import PromptTemplate

TUPLE_DELIMITER = "<|>"
RECORD_DELIMITER = "##"
COMPLETION_DELIMITER = "<|DONE|>"

#: Entity and relationship extraction, LightRAG-style tuples with one short example
#: (the paper: "fewer examples" than LightRAG, [P §4.6 fn. 1]).
EXTRACT_PROMPT = PromptTemplate(
    "Task: read the text and list its entities and the relationships between them.\n"
    "\n"
    "1. For every entity (person, organisation, place, event, work, concept, object, ...) "
    "write one record:\n"
    '("entity"{tuple_delimiter}<name>{tuple_delimiter}<type>{tuple_delimiter}<description>)\n'
    "   <name> is the entity's name as written in the text, capitalised; <type> is one word; "
    "<description> says, from the text only, what the entity is and what it does.\n"
    "2. For every pair of entities from step 1 that the text clearly relates, write one record:\n"
    '("relationship"{tuple_delimiter}<source>{tuple_delimiter}<target>{tuple_delimiter}'
    "<description>{tuple_delimiter}<keywords>)\n"
    "   <description> explains how the two are related; <keywords> are a few comma-separated "
    "words naming the kind of relation.\n"
    "3. Separate records with {record_delimiter} and end the list with {completion_delimiter}. "
    "Write in English and nothing else.\n"
    "\n"
    "Example\n"
    "Text: Marie Curie shared the 1903 Nobel Prize in Physics with Pierre Curie for their "
    "work on radioactivity.\n"
    "Output:\n"
    '("entity"{tuple_delimiter}Marie Curie{tuple_delimiter}person{tuple_delimiter}Physicist who '
    "shared the 1903 Nobel Prize in Physics for work on radioactivity.){record_delimiter}\n"
    '("entity"{tuple_delimiter}Pierre Curie{tuple_delimiter}person{tuple_delimiter}Physicist who '
    "shared the 1903 Nobel Prize in Physics.){record_delimiter}\n"
    '("entity"{tuple_delimiter}Nobel Prize in Physics{tuple_delimiter}award{tuple_delimiter}'
    "Award given in 1903 to Marie and Pierre Curie.){record_delimiter}\n"
    '("relationship"{tuple_delimiter}Marie Curie{tuple_delimiter}Pierre Curie{tuple_delimiter}'
    "Marie and Pierre Curie shared the 1903 prize.{tuple_delimiter}collaboration, shared award)"
    "{record_delimiter}\n"
    '("relationship"{tuple_delimiter}Marie Curie{tuple_delimiter}Nobel Prize in Physics'
    "{tuple_delimiter}Marie Curie won the prize in 1903.{tuple_delimiter}award, recognition)\n"
    "{completion_delimiter}\n"
    "\n"
    "Text: {text}\n"
    "Output:\n"
)

#: Gleaning, first turn: does the model think it missed entities? [P §6.1, gleaning = 1].
GLEAN_CHECK_PROMPT = PromptTemplate(
    "{history}\n\n"
    "Were any entities or relationships of the text left out of the list above? "
    "Answer with one word, YES or NO.\n"
)

#: Gleaning, second turn (only after YES): add the missing records in the same format.
GLEAN_CONTINUE_PROMPT = PromptTemplate(
    "{history}\n\n"
    "Some entities or relationships were left out of the list above. Write only the "
    "missing records, in exactly the same format, ending with {completion_delimiter}.\n"
)

#: Query entities, Eq. 8 [P §3.3, Fig. 2]: few-shot, one entity per line.
QUERY_ENTITIES_PROMPT = PromptTemplate(
    "List the entities and key noun phrases that the question below is about, one per "
    "line, without numbering or explanation.\n"
    "\n"
    "Question: Which strategies help small farms cope with drought and rising feed prices?\n"
    "Entities:\n"
    "strategies\n"
    "small farms\n"
    "drought\n"
    "feed prices\n"
    "\n"
    "Question: How did the printing press change religious debate in early modern Europe?\n"
    "Entities:\n"
    "printing press\n"
    "religious debate\n"
    "early modern Europe\n"
    "\n"
    "Question: {query_str}\n"
    "Entities:\n"
)

#: Follow-up questions per query entity, Eq. 10 [P Fig. 3]: the model plays the user.
#: The question is restated (the paper uses a follow-up chat turn) for completion-only models.
QUESTIONS_PROMPT = PromptTemplate(
    "Question: {query_str}\n"
    "\n"
    'To answer this question well, what would you need to know about "{entity}"? '
    "Write at most {max_questions} short questions, one per line, without explanation.\n"
)

#: Per-entity fine-grained summary, Eq. 11 [P Fig. 4]: as in the paper, the model may
#: add general knowledge (``general_knowledge=False`` picks the strict wording below).
SUMMARY_PROMPT = PromptTemplate(
    "Write a focused summary about {entity}, drawing on the information below. Make it "
    "as useful as possible for answering the listed questions. You may add relevant general "
    "knowledge, but do not state anything the information contradicts or that needs "
    "evidence it does not give. Use a few markdown paragraphs with headings where they help.\n"
    "\n"
    "Information:\n"
    "{context_str}\n"
    "\n"
    "Questions:\n"
    "{questions}\n"
    "\n"
    "Summary:\n"
)

#: Eq. 11 restricted to the gathered information (no general knowledge).
STRICT_SUMMARY_PROMPT = PromptTemplate(
    "Write a focused summary about {entity}, using only the information below. "
    "Make it as useful as possible for answering the listed questions; leave out anything "
    "the information does not support. Use a few markdown paragraphs with headings where "
    "they help.\n"
    "\n"
    "Information:\n"
    "{context_str}\n"
    "\n"
    "Questions:\n"
    "{questions}\n"
    "\n"
    "Summary:\n"
)

#: One reduce round when the summaries do not fit one prompt (as ``TreeSummarize``).
COMBINE_PROMPT = PromptTemplate(
    "Merge the notes below into one note that keeps every fact relevant to the question "
    "(names, numbers, dates, relationships). Do not answer the question yet; write the "
    "merged note only.\n"
    "\n"
    "Notes:\n"
    "{context_str}\n"
    "\n"
    "Question: {query_str}\n"
    "Merged note:\n"
)

#: The reduce step, Eq. 12 [P §3.3] (not shown in the paper): answer from the summaries only.
ANSWER_PROMPT = PromptTemplate(
    "You answer questions from the notes below. Combine them into one well-organised "
    "answer in markdown paragraphs, with sections where they help. Use only what the "
    "notes support; if they do not answer the question, say so.\n"
    "\n"
    "Notes:\n"
    "{context_str}\n"
    "\n"
    "Question: {query_str}\n"
    "Answer:\n"
)

#: The naive retrieve-then-answer baseline's prompt: the same instructions over raw chunks.
NAIVE_ANSWER_PROMPT = PromptTemplate(
    "You answer questions from the passages below. Combine them into one well-organised "
    "answer in markdown paragraphs, with sections where they help. Use only what the "
    "passages support; if they do not answer the question, say so.\n"
    "\n"
    "Passages:\n"
    "{context_str}\n"
    "\n"
    "Question: {query_str}\n"
    "Answer:\n"
)

#: Pairwise judge [P §6.1]: three criteria plus an overall winner, as JSON.
JUDGE_PROMPT = PromptTemplate(
    "You compare two answers to the same question.\n"
    "Criteria:\n"
    "- Comprehensiveness: how fully the answer covers every aspect of the question.\n"
    "- Diversity: how many different perspectives and insights it offers.\n"
    "- Empowerment: how well it helps the reader understand the topic and judge for "
    "themselves.\n"
    "For each criterion pick the better answer, then pick an overall winner.\n"
    "\n"
    "Question: {query_str}\n"
    "\n"
    "Answer 1:\n{answer_1}\n"
    "\n"
    "Answer 2:\n{answer_2}\n"
    "\n"
    'Reply with JSON only, every "winner" being 1 or 2:\n'
    '{"comprehensiveness": {"winner": 1, "reason": "..."}, '
    '"diversity": {"winner": 2, "reason": "..."}, '
    '"empowerment": {"winner": 1, "reason": "..."}, '
    '"overall": {"winner": 1, "reason": "..."}}\n'
)
