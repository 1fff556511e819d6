"""The step ledger: which tier each LLM step runs in, and every fallback, never silent."""

from __future__ import annotations

import json
import logging
from collections import Counter
from typing import Any, ClassVar

import httpx
import openai
import pytest
from llama_index.core.base.llms.types import CompletionResponse, LLMMetadata
from llama_index.core.llms import CustomLLM
from support import ScriptedLLM

from llama_index_graphrag_ext.core.llm.calls import LLMTruncatedError
from llama_index_graphrag_ext.core.llm.parse import LLMOutputError
from llama_index_graphrag_ext.core.llm.resolve import LLMChoice
from llama_index_graphrag_ext.core.llm.steps import (
    LLMFallbackError,
    LLMSteps,
    StepRecord,
    check_on_failure,
    fallback_share,
    reason_of,
)

STEPS_LOG = "llama_index_graphrag_ext.core.llm.steps"


class TinyEmbedded(CustomLLM):
    """Stands in for the bundled SmolLM2 (the embedded tier) without loading llama.cpp."""

    embedded_tier: ClassVar[bool] = True

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="tiny-embedded")

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return CompletionResponse(text="ok")

    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any):
        raise NotImplementedError


def full() -> LLMChoice:
    return LLMChoice(ScriptedLLM(["x"], model_name="qwen2.5-7b"), "argument")


def embedded() -> LLMChoice:
    return LLMChoice(TinyEmbedded(), "embedded-default")


# --------------------------------------------------------------------------- plan


def test_plan_full_llm_uses_the_llm_and_records_it(caplog):
    steps, choice = LLMSteps("CueIndex"), full()
    with caplog.at_level(logging.INFO, logger=STEPS_LOG):
        assert steps.plan("doc2query", choice, needs="json", stand_in="keywords") is choice.llm
    record = steps.record("doc2query")
    assert (record.tier, record.llm_class, record.model, record.source) == (
        "full-llm",
        "ScriptedLLM",
        "qwen2.5-7b",
        "argument",
    )
    assert record.note == "" and record.stand_in == "keywords"
    assert not caplog.records


def test_plan_embedded_json_step_runs_llm_free_with_a_warning(caplog):
    steps = LLMSteps("CueIndex")
    with caplog.at_level(logging.INFO, logger=STEPS_LOG):
        assert steps.plan("knowledge-units", embedded(), needs="json", stand_in="sentences") is None
    record = steps.record("knowledge-units")
    assert record.tier == "llm-free" and "cannot write JSON" in record.note
    assert record.llm_class == "TinyEmbedded" and record.source == "embedded-default"
    [warning] = [r for r in caplog.records if r.levelno == logging.WARNING]
    message = warning.getMessage()
    assert "CueIndex knowledge-units" in message and "sentences" in message


def test_plan_embedded_text_step_keeps_the_embedded_llm():
    steps, choice = LLMSteps("CueIndex"), embedded()
    assert steps.plan("answer", choice, needs="text", stand_in="extractive") is choice.llm
    assert steps.record("answer").tier == "embedded-llm"


def test_plan_without_an_llm_is_llm_free_and_only_informs(caplog):
    steps = LLMSteps("LPRAG")
    with caplog.at_level(logging.INFO, logger=STEPS_LOG):
        planned = steps.plan(
            "summaries", LLMChoice(None, "none"), needs="text", stand_in="lead", on_failure="raise"
        )
    assert planned is None
    record = steps.record("summaries")
    assert record.tier == "llm-free" and record.llm_class is None and "no LLM" in record.note
    assert [r.levelno for r in caplog.records] == [logging.INFO]


def test_plan_embedded_json_step_with_raise_is_an_error():
    steps = LLMSteps("CueIndex")
    with pytest.raises(LLMFallbackError, match="on_llm_failure='raise'"):
        steps.plan("doc2query", embedded(), needs="json", stand_in="keywords", on_failure="raise")
    assert steps.record("doc2query") is None


def test_planning_again_keeps_the_counts():
    steps = LLMSteps("X")
    steps.plan("extract", full(), needs="json", stand_in="regex")
    steps.count("extract", 10)
    steps.fell_back("extract", ["HTTP 500"])
    steps.plan("extract", full(), needs="json", stand_in="regex")
    record = steps.record("extract")
    assert (record.items, record.fallbacks, record.reasons) == (10, 1, Counter({"HTTP 500": 1}))


# --------------------------------------------------------------------------- counts and fallbacks


def test_count_and_fell_back_log_one_warning_with_counts_and_reasons(caplog):
    steps = LLMSteps("FGRAG")
    steps.plan("extract", full(), needs="json", stand_in="regex entities")
    steps.count("extract", 8)
    steps.count("extract", 2)
    with caplog.at_level(logging.WARNING, logger=STEPS_LOG):
        steps.fell_back("extract", ["HTTP 500", "timeout", "HTTP 500"], what="chunk")
    [warning] = caplog.records
    message = warning.getMessage()
    assert "3 chunk(s) fell back to regex entities" in message
    assert "HTTP 500 x2" in message and "timeout x1" in message and "3 of 10" in message
    record = steps.record("extract")
    assert (record.items, record.fallbacks) == (10, 3)
    assert record.reasons == Counter({"HTTP 500": 2, "timeout": 1})


def test_fell_back_with_no_reasons_says_nothing(caplog):
    steps = LLMSteps("X")
    steps.plan("s", full(), needs="text", stand_in="y")
    with caplog.at_level(logging.WARNING, logger=STEPS_LOG):
        steps.fell_back("s", [])
    assert not caplog.records and steps.record("s").fallbacks == 0


def test_fell_back_with_raise_is_an_error_and_still_recorded():
    steps = LLMSteps("X")
    steps.plan("s", full(), needs="text", stand_in="y")
    with pytest.raises(LLMFallbackError, match="1 item"):
        steps.fell_back("s", ["unusable reply"], on_failure="raise")
    assert steps.record("s").fallbacks == 1


def test_unplanned_steps_are_an_error():
    steps = LLMSteps("X")
    with pytest.raises(KeyError, match="never planned"):
        steps.count("nope", 1)
    with pytest.raises(KeyError):
        steps.fell_back("nope", ["timeout"])


# --------------------------------------------------------------------------- persistence


def test_to_dict_and_load_round_trip_through_json():
    steps = LLMSteps("CueIndex")
    steps.plan("doc2query", full(), needs="json", stand_in="keywords")
    steps.plan("units", embedded(), needs="json", stand_in="sentences")
    steps.count("doc2query", 5)
    steps.fell_back("doc2query", ["timeout", "HTTP 429"])
    data = json.loads(json.dumps(steps.to_dict()))
    assert list(data) == ["doc2query", "units"]
    assert data["doc2query"]["reasons"] == {"timeout": 1, "HTTP 429": 1}
    loaded = LLMSteps("CueIndex").load(data)
    assert [r.to_dict() for r in loaded.records()] == [r.to_dict() for r in steps.records()]
    assert loaded.summary() == steps.summary()
    assert "doc2query: full-llm (ScriptedLLM(qwen2.5-7b)), 5 item(s), 2 fallback(s)" in (
        loaded.summary()
    )
    assert LLMSteps("Y").load(None).records() == []


def test_record_from_dict_ignores_unknown_fields():
    record = StepRecord.from_dict({"step": "s", "tier": "full-llm", "future_field": 1})
    assert record.step == "s" and record.reasons == Counter()


def test_fallback_share_sums_full_tier_steps_only():
    steps = LLMSteps("X")
    steps.plan("a", full(), needs="json", stand_in="-")
    steps.plan("b", full(), needs="text", stand_in="-")
    steps.plan("c", embedded(), needs="json", stand_in="-")  # llm-free: not counted
    steps.count("a", 100)
    steps.fell_back("a", ["timeout"] * 4)
    steps.fell_back("b", ["HTTP 500"] * 3)  # b counted no items: fallbacks count as items
    steps.count("c", 50)
    assert fallback_share(steps.records()) == (7, 103)
    assert fallback_share(steps.to_dict().values()) == (7, 103)  # persisted records too
    assert fallback_share([]) == (0, 0)


def test_check_on_failure():
    assert check_on_failure("fallback") == "fallback" and check_on_failure("raise") == "raise"
    with pytest.raises(ValueError):
        check_on_failure("ignore")


# --------------------------------------------------------------------------- reasons


def _status(cls, status):
    request = httpx.Request("POST", "https://api.example.com/v1/chat/completions")
    return cls("err", response=httpx.Response(status, request=request), body=None)


@pytest.mark.parametrize(
    ("exc", "reason"),
    [
        (LLMTruncatedError("cut"), "reply cut by the length limit"),
        (LLMOutputError("no JSON"), "unusable reply"),
        (_status(openai.InternalServerError, 500), "HTTP 500"),
        (_status(openai.RateLimitError, 429), "HTTP 429"),
        (_status(openai.AuthenticationError, 401), "HTTP 401"),
        (TimeoutError(), "timeout"),
        (openai.APITimeoutError(request=httpx.Request("POST", "https://x")), "timeout"),
        (httpx.ReadTimeout("slow"), "timeout"),
        (ConnectionError("reset"), "connection error"),
        (openai.APIConnectionError(request=httpx.Request("POST", "https://x")), "connection error"),
        (KeyError("k"), "KeyError"),
    ],
)
def test_reason_of(exc, reason):
    assert reason_of(exc) == reason
