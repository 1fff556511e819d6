"""Reading replies as real models write them: reasoning, fences, wrappers, labels, yes/no."""

from __future__ import annotations

import time

import pytest
from pydantic import BaseModel

from llama_index_graphrag_ext.core.llm.lists import is_degenerate, parse_list, strip_chatter
from llama_index_graphrag_ext.core.llm.parse import (
    LLMOutputError,
    find_items,
    is_refusal,
    is_unanswered,
    json_candidates,
    parse_answer,
    parse_json,
    parse_yes_no,
    strip_label,
    strip_reasoning,
    validate_reply,
)


class QA(BaseModel):
    question: str
    answer: str


class QAPairs(BaseModel):
    pairs: list[QA]


class Verdict(BaseModel):
    answer: str
    confidence: float


# --------------------------------------------------------------------------- reasoning


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("<think>The user wants Paris.</think>\nParis", "Paris"),
        ("<THINK>x</THINK>Paris", "Paris"),
        ("<thinking>a</thinking> <reasoning>b</reasoning>\nParis", "Paris"),
        ("<think>first</think>Par<think>second</think>is", "Paris"),
        ('<think>multi\nline\n{"a": 1}</think>\n\nParis', "Paris"),
        # Cut before the answer: the reasoning never closed, so there is no answer.
        ("<think>Let me work this out step by step and", ""),
        ("  \n<think>still thinking", ""),
        # Servers that strip the opening tag leave only the closing one.
        ("so the capital is Paris.</think>\nParis", "Paris"),
        ("  Paris  ", "Paris"),
        ("", ""),
    ],
)
def test_strip_reasoning(reply, expected):
    assert strip_reasoning(reply) == expected


def test_strip_reasoning_keeps_prose_that_mentions_tags_midway():
    assert strip_reasoning("Answer: <b>Paris</b>") == "Answer: <b>Paris</b>"


# --------------------------------------------------------------------------- JSON

FENCED = '```json\n{"a": 1}\n```'


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ("[1, 2, 3]", [1, 2, 3]),
        (FENCED, {"a": 1}),
        ('```\n[{"q": "x"}]\n```', [{"q": "x"}]),
        ('```JSON\n{"a": 1}\n```', {"a": 1}),
        ('Sure! Here is the JSON:\n```json\n{"a": [1, 2]}\n```\nLet me know!', {"a": [1, 2]}),
        ('Sure! Here is the JSON: {"a": 1}\nI hope this helps.', {"a": 1}),
        ('<think>maybe {"a": 0}?</think>\n{"a": 1}', {"a": 1}),
        ('```json\n{"a": 1', {"a": 1}),  # fence never closed, object cut off
        ('{"a": 1, "b": [1, 2,],}', {"a": 1, "b": [1, 2]}),  # trailing commas
        ("{'a': 'x', 'b': ['y', 'z']}", {"a": "x", "b": ["y", "z"]}),  # single quotes
        ('{name: "x", age: 3}', {"name": "x", "age": 3}),  # unquoted keys
        ('[{"s": "a"}, {"s": "b"', [{"s": "a"}, {"s": "b"}]),  # array cut off
        ('{"ok": True, "x": None}', {"ok": True, "x": None}),  # Python literals
        ('{"t": "braces } and { inside", "n": 2}', {"t": "braces } and { inside", "n": 2}),
        ('{"unicode": "caf\u00e9 \u65e5\u672c"}', {"unicode": "caf\u00e9 \u65e5\u672c"}),
        ('{"a": 1 "b": 2}', {"a": 1, "b": 2}),  # missing comma
        ("{\u201ckey\u201d: \u201cvalue\u201d}", {"key": "value"}),  # curly quotes
        ('{"q": "He said "hi" to me"}', {"q": 'He said "hi" to me'}),  # unescaped quotes
        ('{"a": "line one\nline two"}', {"a": "line one\nline two"}),  # raw newline
        ('{"a": 1} // a comment', {"a": 1}),
        ('{"n": +1, "m": .5}', {"n": 1, "m": 0.5}),
        ('{"answer": yes}', {"answer": "yes"}),
        ('```python\n{"a": (1, 2)}\n```', {"a": [1, 2]}),
        ('noise {"outer": {"inner": "}"}} trailing }', {"outer": {"inner": "}"}}),
        ('"plain"', "plain"),
        ("The JSON is [1, 2] as asked", [1, 2]),
    ],
)
def test_parse_json_reads_real_reply_shapes(reply, expected):
    assert parse_json(reply) == expected


def test_json_candidates_order_and_two_objects_in_prose():
    # A fenced block comes before a looser reading of the whole reply.
    assert json_candidates('Prefer this:\n```json\n{"a": 1}\n```')[0] == {"a": 1}
    found = json_candidates('First {"a": 1} and then {"b": 2}.')
    assert found[0] == [{"a": 1}, {"b": 2}]
    assert {"a": 1} in found[1:] and {"b": 2} in found[1:]
    assert json_candidates('<think>never closed {"a": 1}') == []


@pytest.mark.parametrize("reply", ["", "   ", "no json here at all", "<think>cut [1, 2"])
def test_parse_json_without_json_raises_with_the_raw_reply(reply):
    with pytest.raises(LLMOutputError) as info:
        parse_json(reply)
    assert info.value.raw == reply
    assert isinstance(info.value, ValueError)  # callers catch it as a ValueError too


def test_parse_json_on_deeply_nested_garbage_says_no_json_quickly():
    # A small model stuck in a loop: json-repair's recursion limit must not escape.
    for reply in ("{ [ " * 300 + "word " * 20, "{" * 4000, "[" * 4000):
        start = time.perf_counter()
        with pytest.raises(LLMOutputError):
            parse_json(reply)
        assert time.perf_counter() - start < 2.0


def test_json_candidates_one_object_per_line_keeps_every_object():
    # json-repair alone keeps only the last of same-keyed objects.
    reply = 'Here they are:\n{"q": "a", "n": 1}\n{"q": "b", "n": 2}\nDone.'
    assert json_candidates(reply)[0] == [{"q": "a", "n": 1}, {"q": "b", "n": 2}]
    fenced = '```json\n{"q": "a"}\n{"q": "b"}\n```'
    assert json_candidates(fenced)[0] == [{"q": "a"}, {"q": "b"}]


def test_llm_output_error_pickles_with_its_raw_reply():
    import pickle

    err = pickle.loads(pickle.dumps(LLMOutputError("bad", raw="the reply")))
    assert str(err) == "bad" and err.raw == "the reply"


# --------------------------------------------------------------------------- find_items

ITEMS = [{"q": "a"}, {"q": "b"}]


@pytest.mark.parametrize(
    "value",
    [
        ITEMS,
        {"qa_pairs": ITEMS},
        {"questions": ITEMS, "note": "two of them", "count": 2},
        {"result": {"items": ITEMS}},
        {"1": ITEMS[0], "2": ITEMS[1]},
        {"2.": ITEMS[1], "1.": ITEMS[0]},
        {"#1": ITEMS[0], "#2": ITEMS[1]},
    ],
)
def test_find_items_sees_through_wrappers(value):
    assert find_items(value) == ITEMS


def test_find_items_numbered_keys_sort_numerically():
    value = {str(i): i for i in (10, 2, 1, 3)}
    assert find_items(value) == [1, 2, 3, 10]


@pytest.mark.parametrize(
    "value",
    [
        {"questions": [1], "answers": [2]},  # two lists: ambiguous
        {"a": 1, "b": "x"},
        {"a": {"b": {"c": {"d": [1]}}}},  # deeper than one extra level of wrapping
        "text",
        42,
        None,
    ],
)
def test_find_items_gives_none_where_there_is_no_single_list(value):
    assert find_items(value) is None


# --------------------------------------------------------------------------- validate_reply

PAIR_A = '{"question": "Who?", "answer": "Ada"}'
PAIR_B = '{"question": "When?", "answer": "1843"}'
BOTH = [QA(question="Who?", answer="Ada"), QA(question="When?", answer="1843")]


@pytest.mark.parametrize(
    "reply",
    [
        f'{{"pairs": [{PAIR_A}, {PAIR_B}]}}',
        f"[{PAIR_A}, {PAIR_B}]",
        f'Sure! Here are the pairs:\n```json\n{{"qa_pairs": [{PAIR_A}, {PAIR_B}]}}\n```\nDone.',
        f'{{"result": {{"items": [{PAIR_A}, {PAIR_B}]}}}}',
        f'{{"1": {PAIR_A}, "2": {PAIR_B}}}',
        f"<think>Two pairs.</think>\n[{PAIR_A}, {PAIR_B},]",
        f"{PAIR_A}\n{PAIR_B}",  # one object per line, no array
        f"[{PAIR_A}, {PAIR_B[:-1]}",  # cut mid-object: repaired
    ],
)
def test_validate_reply_list_model_from_any_wrapper(reply):
    assert validate_reply(QAPairs, reply).pairs == BOTH


def test_validate_reply_drops_items_that_do_not_validate():
    # One malformed item among good ones: the good ones are kept (as documented).
    reply = f'[{PAIR_A}, {{"question": "Where?"}}, {PAIR_B}]'
    assert validate_reply(QAPairs, reply).pairs == BOTH


def test_validate_reply_empty_list_is_an_empty_result():
    assert validate_reply(QAPairs, '{"pairs": []}').pairs == []


@pytest.mark.parametrize(
    "reply",
    [
        '{"answer": "Paris", "confidence": 0.9}',
        'Here you go:\n```\n{"answer": "Paris", "confidence": "0.9"}\n```',
        "<think>easy</think>{'answer': 'Paris', 'confidence': 0.9,}",
        '[{"answer": "Paris", "confidence": 0.9}]',  # one object in a list
    ],
)
def test_validate_reply_multi_field_model(reply):
    assert validate_reply(Verdict, reply) == Verdict(answer="Paris", confidence=0.9)


@pytest.mark.parametrize(
    ("model", "reply", "why"),
    [
        (QAPairs, "I could not find any pairs.", "no JSON"),
        (QAPairs, '["just", "strings"]', "no QAPairs"),
        (QAPairs, '{"questions": [1], "answers": [2]}', "no QAPairs"),
        (Verdict, '{"answer": "Paris"}', "no Verdict"),
        (Verdict, "<think>unfinished", "no JSON"),
    ],
)
def test_validate_reply_unusable_raises_with_reason(model, reply, why):
    with pytest.raises(LLMOutputError, match=why) as info:
        validate_reply(model, reply)
    assert info.value.raw == reply


# --------------------------------------------------------------------------- lists


def test_parse_list_markers_preamble_and_commentary():
    reply = (
        "Here are the questions:\n"
        "1. What is X?\n"
        "2) Why Y?\n"
        "\n"
        "(3) How Z?\n"
        "- dash item\n"
        "* star item\n"
        "[bracketed]\n"
        "[7] numbered in brackets\n"
        '\u2022 "quoted"\n'
        "8. **bold**\n"
        "4.   \n"
        "Let me know if you need more."
    )
    assert parse_list(reply) == [
        "What is X?",
        "Why Y?",
        "How Z?",
        "dash item",
        "star item",
        "bracketed",
        "numbered in brackets",
        "quoted",
        "bold",
    ]


def test_parse_list_plain_lines_numbers_in_text_and_reasoning():
    assert parse_list("alpha\n\n  beta  \n") == ["alpha", "beta"]
    assert parse_list("1.5 million people\n2024 was a year") == [
        "1.5 million people",
        "2024 was a year",
    ]
    assert parse_list("<think>1. not this</think>\n1. this\n2. that") == ["this", "that"]
    assert parse_list("") == []


# --------------------------------------------------------------------------- answers


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("Answer: Paris", "Paris"),
        ("**Answer:** Paris", "Paris"),
        ("**Answer**: Paris", "Paris"),
        ("Final Answer: 42", "42"),
        ("Answer: Final answer: 42", "42"),
        ("Rewritten question: Who founded the company?", "Who founded the company?"),
        ("Rewritten sub-question: When?", "When?"),
        ("answer\uff1a Paris", "Paris"),
        ("Paris: the capital", "Paris: the capital"),  # not a label
        ("Paris", "Paris"),
    ],
)
def test_strip_label(line, expected):
    assert strip_label(line) == expected


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("Answer: Paris", "Paris"),
        ("**Answer:** Paris", "Paris"),
        ("<think>France... capital...</think>\nAnswer: Paris", "Paris"),
        ("The capital of France.\nAnswer: Paris", "Paris"),
        ("Let me think.\nAnswer: Lyon\nWait.\nFinal answer: Paris", "Paris"),
        ('"Paris"', "Paris"),
        ("**Paris**", "Paris"),
        ("Paris\nIt is the capital of France.", "Paris"),
        ("Rewritten question: Who directed Jaws?", "Who directed Jaws?"),
        ("<think>unterminated", ""),
        ("", ""),
    ],
)
def test_parse_answer(reply, expected):
    assert parse_answer(reply) == expected


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("Yes", True),
        ("yes.", True),
        ("Based on the context, yes.", True),
        ("<think>no wait, it does</think>YES.", True),
        ("The context is sufficient", True),
        ("The passages are sufficient to answer the question.", True),
        ("The context contains the answer.", True),
        ("Yes, although it does not mention the year.", True),
        ("No", False),
        ("No, it does not say.", False),
        ("The context does not contain the answer.", False),
        ("Insufficient.", False),
        ("Not enough information.", False),
        ("The context is not sufficient.", False),
        ("The context isn't sufficient to answer.", False),
        ("The context isn\u2019t sufficient.", False),
        ("Not sure, but yes.", True),
        ("It is not correct.", False),
        ("Maybe", None),
        ("", None),
    ],
)
def test_parse_yes_no(reply, expected):
    assert parse_yes_no(reply) is expected


@pytest.mark.parametrize(
    "answer",
    [
        "I don't know",
        "I do not know.",
        "Not specified",
        "Not mentioned in the context.",
        "The passages do not mention it",
        "The context does not say.",
        "unknown",
        "Unknown.",
        "Answer: unknown",
        "N/A",
        "None",
        "Unable to determine from the context.",
        "Cannot be determined",
        "There is no information about that.",
        "Insufficient information",
        "It is not specified.",
        "<think>hmm</think>\nI cannot answer that.",
        "",
        "   ",
    ],
)
def test_is_unanswered_recognises_refusals(answer):
    assert is_unanswered(answer)


@pytest.mark.parametrize(
    "answer",
    [
        "Paris",
        "Answer: Paris",
        "1843",
        "Nairobi",  # starts like "n/a"
        "NASA",
        "Nancy Pelosi",
        "Nonesuch Records",  # starts like "none"
        "Notre-Dame de Paris",
        "Nothing Else Matters",
        "Yes, the context says so.",
        "The Unknown Soldier",
    ],
)
def test_is_unanswered_leaves_real_answers_alone(answer):
    assert not is_unanswered(answer)


@pytest.mark.parametrize(
    "reply",
    [
        "I'm sorry, but I can't help with that request.",
        "I’m sorry — I cannot rewrite this text.",
        "<think>The text is odd.</think>\nI cannot assist with that.",
        "As an AI language model, I am unable to do this.",
        "Unfortunately, I can't split this paragraph.",
    ],
)
def test_a_refusal_is_no_list(reply):
    assert is_refusal(reply) and parse_list(reply) == []


def test_a_list_is_kept_even_after_an_apologetic_preamble():
    reply = "Sorry for the wait! Here they are:\n1. Who founded Acme?\n2. When?"
    assert parse_list(reply) == ["Who founded Acme?", "When?"]
    assert parse_list("Ada Lovelace wrote the first program.") == [
        "Ada Lovelace wrote the first program."
    ]
    assert not is_refusal("Sorrento is a town in Campania.")


# --------------------------------------------------------------------------- an item is content


@pytest.mark.parametrize(
    ("reply", "items"),
    [
        # LLaMA-3 style: a preamble and a sign-off around unmarked lines.
        (
            "Here are the statements:\nAda was born in 1815.\nShe worked with Babbage.\n\n"
            "I hope this helps!",
            ["Ada was born in 1815.", "She worked with Babbage."],
        ),
        # GPT style: a marked list between chat lines.
        (
            "Sure! Here are the entities:\n- Felix Salten\n- Bambi\n\nLet me know if you need more.",
            ["Felix Salten", "Bambi"],
        ),
        # A preamble without a colon, an unmarked list.
        ("Here are the entities\nParis\nFrance", ["Paris", "France"]),
        # Qwen style: a JSON array where lines were asked, one element per line.
        (
            '[\n"Journal of Psychotherapy Integration",\n"American Psychological Association",\n]',
            ["Journal of Psychotherapy Integration", "American Psychological Association"],
        ),
        ('```json\n["Paris", "France"]\n```', ["Paris", "France"]),
        ('{"entities": ["Paris", "France"]}', ["Paris", "France"]),
        ('[{"name": "Paris"}, {"name": "France"}]', ["Paris", "France"]),
        ("```\nParis\nFrance\n```", ["Paris", "France"]),
        (
            "1. Who wrote Bambi?\n2. When?\n(Note: the passage names one author.)",
            ["Who wrote Bambi?", "When?"],
        ),
    ],
)
def test_parse_list_keeps_only_content(reply, items):
    assert parse_list(reply) == items


def test_parse_list_keeps_real_items_that_look_like_chat():
    # Statements that begin with an interjection's word, or "The following", are content.
    assert parse_list("Great Britain is an island.\nThe following year he moved.") == [
        "Great Britain is an island.",
        "The following year he moved.",
    ]
    # A bracketed list is not JSON.
    assert parse_list("[Ada was born in 1815.]\n[She worked with Babbage.]") == [
        "Ada was born in 1815.",
        "She worked with Babbage.",
    ]
    assert parse_list("Bora Bora\nNew York, New York") == ["Bora Bora", "New York, New York"]


def test_repetition_loops_are_not_items():
    loop = " ".join(["New York"] * 30)
    assert is_degenerate(loop) and is_degenerate("the " * 50) and is_degenerate("x" * 2000)
    assert not is_degenerate("What is the birthplace of the author who wrote the novel Bambi?")
    assert parse_list(f"1. {loop}\n2. Paris") == ["Paris"]


def test_strip_chatter_keeps_the_content():
    reply = (
        "Sure! Here is the summary:\nAda wrote the first program. She worked with Babbage. "
        "Let me know if you need anything else."
    )
    assert strip_chatter(reply) == "Ada wrote the first program. She worked with Babbage."
    assert strip_chatter("Paris is the capital.\n\nI hope this helps!") == "Paris is the capital."
    assert strip_chatter("Paris is the capital.") == "Paris is the capital."
    assert strip_chatter("Let me know.") == "Let me know."  # nothing else would remain
