"""LP-RAG's prompts: our own wording, with the paper's bracketed one-item-per-line output (App. D)."""

from __future__ import annotations

from llama_index.core.prompts import PromptTemplate

#: Step 1 (§3.1, Box D.1 format): split a paragraph into atomic, self-contained chunks.
ATOMIC_CHUNK_PROMPT = PromptTemplate(
    "Rewrite the paragraph below as a list of atomic statements. Go through it "
    "sentence by sentence. Each statement holds exactly one fact, idea or claim, "
    "is as small as it can be without losing meaning, and can be understood on its "
    "own: replace every pronoun with the name it refers to and restore any words "
    "the sentence leaves implicit.\n"
    "Write one statement per line, each inside square brackets, and nothing else.\n\n"
    "Example paragraph:\n"
    "Marie Curie was born in Warsaw in 1867. She later moved to Paris, where she "
    "studied physics.\n"
    "Example answer:\n"
    "[Marie Curie was born in Warsaw.]\n"
    "[Marie Curie was born in 1867.]\n"
    "[Marie Curie later moved to Paris.]\n"
    "[Marie Curie studied physics in Paris.]\n\n"
    "Paragraph:\n"
    "{text}\n"
    "Answer:\n"
)

#: Step 4 (§3.2, Eq. 3, Box D.3 format): questions a person could ask of a batch of chunks.
SYNTHETIC_QUERY_PROMPT = PromptTemplate(
    "Below are {num_chunks} related passages. Write {num_queries} different questions "
    "that a curious person might ask and that these passages answer. Prefer questions "
    "that need facts from more than one passage. Phrase them the way people ask "
    "questions; do not copy sentences.\n"
    "Write one question per line, each inside square brackets, and nothing else.\n\n"
    "Example passages:\n"
    "[Passage 1] Crux is an American comic book.\n"
    "[Passage 2] Crux was published by CrossGen Entertainment, which operated from "
    "1998 to 2004.\n"
    "Example answer:\n"
    "[Which company published the comic book Crux?]\n"
    "[In which years was the publisher of Crux active?]\n\n"
    "Passages:\n"
    "{chunks}\n"
    "Answer:\n"
)

#: Step 8 (§3.4, Box D.2 idea): answer from the retrieved chunks only, best first.
LP_ANSWER_PROMPT = PromptTemplate(
    "Chunks, most relevant first:\n"
    "---------------------\n"
    "{context_str}\n"
    "---------------------\n"
    "Answer the question using only these chunks. If they do not contain the "
    'answer, reply "I don\'t know." Reply with the answer alone, in a few words.\n'
    "Question: {query_str}\n"
    "Answer: "
)
