"""Tolerant parsing of generated question-answer pairs."""

from __future__ import annotations

import pytest

from llama_index_graphrag_ext.qcg.parsing import normalize_query, parse_pairs


def test_json_array_of_objects():
    text = '[{"index": 0, "query": "Who founded X?", "answer": "Jane"}, {"query": "When?", "answer": "1990"}]'
    assert parse_pairs(text) == [("Who founded X?", "Jane"), ("When?", "1990")]


def test_fenced_broken_json_with_other_keys_and_wrapper():
    text = (
        "Sure! Here they are:\n```json\n{'pairs': [{'Question': 'Where is Y?', 'A': 'Oslo'},\n"
        " {'question': 'What is Z?', 'answer': 'a river',}]\n```"
    )
    assert parse_pairs(text) == [("Where is Y?", "Oslo"), ("What is Z?", "a river")]


def test_truncated_json_keeps_complete_items():
    text = '[{"query": "Who wrote B?", "answer": "Ann"}, {"query": "When was B publ'
    pairs = parse_pairs(text)
    assert pairs[0] == ("Who wrote B?", "Ann")


def test_list_of_lists():
    assert parse_pairs('[["Who is A?", "a cat"], ["Why?", "because"]]') == [
        ("Who is A?", "a cat"),
        ("Why?", "because"),
    ]


@pytest.mark.parametrize(
    "text",
    [
        "Q: Who built the bridge? A: Roebling\nQ: When did it open? A: 1883",
        "1. Q: Who built the bridge? | A: Roebling\n2. Q: When did it open? | A: 1883",
        "Question: Who built the bridge?\nAnswer: Roebling\n\nQuestion: When did it open?\nAnswer: 1883",
        "**Q1:** Who built the bridge? **A1:** Roebling\n**Q2:** When did it open? **A2:** 1883",
        "1. Who built the bridge? Roebling\n2. When did it open? 1883",
    ],
)
def test_line_formats(text):
    assert parse_pairs(text) == [
        ("Who built the bridge?", "Roebling"),
        ("When did it open?", "1883"),
    ]


def test_question_without_answer_is_kept_with_empty_answer():
    assert parse_pairs("Q: What is the capital of Peru?\nQ: Where is Lima?") == [
        ("What is the capital of Peru?", ""),
        ("Where is Lima?", ""),
    ]


def test_duplicates_and_empty_queries_are_dropped():
    text = '[{"query": "Who is A?", "answer": "x"}, {"query": "who is a", "answer": "y"}, {"query": "", "answer": "z"}]'
    assert parse_pairs(text) == [("Who is A?", "x")]
    assert normalize_query("Who  is A?") == normalize_query("who is a")


@pytest.mark.parametrize("text", ["", "   ", "I cannot help with that", "{}", "[]"])
def test_unusable_output_gives_nothing(text):
    assert parse_pairs(text) == []


def test_numbers_inside_the_query_field_are_stripped_before_dedup():
    text = "Q: 1. Who edits the journal?\nA: Jan\nQ: 2. Who edits the journal?\nA: Jan"
    assert parse_pairs(text) == [("Who edits the journal?", "Jan")]


def test_small_model_quirks():
    # Answers that are questions become queries; unmarked lines after a question answer it.
    text = (
        "Q: 1. What is the journal?\nA: 2. How does the journal work?\nB: 3. Other?\n"
        "Q: 4. What is the passage about?\nThe passage is about psychology.\n"
    )
    assert parse_pairs(text) == [
        ("What is the journal?", ""),
        ("How does the journal work?", ""),
        ("What is the passage about?", "The passage is about psychology."),
    ]
