"""The one rule that picks the LLM of every component, and what an LLM can do.

A component's LLM is, in order (:func:`choose_llm`):

1. the ``llm=`` it was given (an ``LLM``, or a provider name);
2. ``Settings.llm``, when the user set one (LlamaIndex's lazy default, OpenAI
   without a key, is never triggered);
3. the provider the environment names: ``GRAPHRAG_LLM``, else
   ``OPENAI_BASE_URL`` / ``OPENAI_API_BASE`` (an OpenAI-compatible server),
   else ``OPENAI_API_KEY`` (OpenAI);
4. the embedded SmolLM2, for the steps it can do;
5. none: LLM-free.

The bundled SmolLM2 is the ``embedded-llm`` tier: it writes short text but not
JSON (:func:`writes_json`).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from llama_index.core.llms import LLM

logger = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_OPENAI_MODEL",
    "PROVIDERS",
    "TIERS",
    "LLMChoice",
    "accepts_max_tokens",
    "choose_llm",
    "describe_llm",
    "is_embedded",
    "llm_for_provider",
    "llm_identity",
    "llm_tier",
    "provider_from_env",
    "resolve_llm",
    "structured_mode",
    "writes_json",
]

#: Providers known by name (``--llm``, ``GRAPHRAG_LLM``, ``llm="..."``).
PROVIDERS = ("openai", "openai-like", "embedded", "none")
#: The three tiers, richest first.
TIERS = ("full-llm", "embedded-llm", "llm-free")
#: OpenAI model used when the environment selects OpenAI and names no model.
DEFAULT_OPENAI_MODEL = "gpt-4o-mini"

Tier = Literal["full-llm", "embedded-llm", "llm-free"]


def is_embedded(llm: Any) -> bool:
    """Whether ``llm`` is the bundled SmolLM2 (the embedded tier)."""
    if llm is None:
        return False
    if getattr(type(llm), "embedded_tier", False):
        return True
    try:
        name = str(llm.metadata.model_name or "")
    except Exception:  # metadata that needs a live connection: not the embedded model
        name = ""
    path = str(getattr(llm, "model_path", "") or "")
    return "smollm" in f"{name} {path}".lower()


def llm_tier(llm: Any) -> Tier:
    """``full-llm``, ``embedded-llm`` or ``llm-free`` (for ``None``)."""
    if llm is None:
        return "llm-free"
    return "embedded-llm" if is_embedded(llm) else "full-llm"


def writes_json(llm: Any) -> bool:
    """Whether ``llm`` can be asked for JSON (every LLM but the embedded SmolLM2)."""
    return llm is not None and not is_embedded(llm)


def structured_mode(llm: Any) -> Literal["json_schema", "function_calling", "text"]:
    """How structured output is asked of ``llm``.

    ``json_schema`` (OpenAI structured outputs) or ``function_calling`` go
    through LlamaIndex's ``astructured_predict``; ``text`` asks for JSON in the
    prompt and reads it tolerantly.
    """
    should = getattr(llm, "_should_use_structure_outputs", None)
    try:
        if callable(should) and should():
            return "json_schema"
        if llm.metadata.is_function_calling_model:
            return "function_calling"
    except Exception:  # metadata that needs a live connection: ask in text
        logger.debug("could not read %s's capabilities", type(llm).__name__, exc_info=True)
    return "text"


def accepts_max_tokens(llm: Any) -> bool:
    """Whether ``llm`` takes a per-call ``max_tokens`` (OpenAI-style clients, the suite's own)."""
    fields = getattr(type(llm), "model_fields", {})
    return "max_tokens" in fields or bool(getattr(type(llm), "accepts_max_tokens", False))


def llm_identity(llm: Any) -> dict[str, Any]:
    """``{"class", "model", "tier"}`` of an LLM, for stats and manifests (no keys, no URLs)."""
    if llm is None:
        return {"class": None, "model": None, "tier": "llm-free"}
    try:
        model = str(llm.metadata.model_name or "")
    except Exception:  # metadata that needs a live connection
        model = str(getattr(llm, "model", "") or "")
    if model.endswith(".gguf"):
        model = Path(model).name
    return {"class": type(llm).__name__, "model": model or None, "tier": llm_tier(llm)}


def describe_llm(llm: Any) -> str:
    """A short human label: ``OpenAILike(qwen2.5-7b)``, or ``none (LLM-free)``."""
    if llm is None:
        return "none (LLM-free)"
    ident = llm_identity(llm)
    return f"{ident['class']}({ident['model'] or '?'})"


def provider_from_env(env: dict[str, str] | None = None) -> str:
    """The provider the environment asks for (``embedded`` when it names none).

    ``GRAPHRAG_LLM`` wins, then an OpenAI-compatible base URL, then ``OPENAI_API_KEY``.
    """
    env = dict(os.environ if env is None else env)
    chosen = env.get("GRAPHRAG_LLM", "").strip().lower()
    if chosen:
        if chosen not in PROVIDERS:
            raise ValueError(f"GRAPHRAG_LLM={chosen!r}; expected one of {PROVIDERS}")
        return chosen
    if env.get("OPENAI_API_BASE") or env.get("OPENAI_BASE_URL"):
        return "openai-like"
    if env.get("OPENAI_API_KEY"):
        return "openai"
    return "embedded"


def llm_for_provider(provider: str, env: dict[str, str] | None = None) -> LLM | None:
    """Build the LLM of a named provider (``none``: ``None``, LLM-free).

    OpenAI clients get no retries of their own: the caller is the one retry layer.
    """
    env = dict(os.environ if env is None else env)
    model = env.get("GRAPHRAG_LLM_MODEL")
    if provider == "none":
        return None
    if provider == "embedded":
        from ..defaults import embedded_llm

        return embedded_llm()
    if provider == "openai":
        from llama_index.llms.openai import OpenAI

        return OpenAI(model=model or DEFAULT_OPENAI_MODEL, temperature=0.0, max_retries=0)
    if provider == "openai-like":
        from llama_index.llms.openai_like import OpenAILike

        base = env.get("OPENAI_API_BASE") or env.get("OPENAI_BASE_URL")
        if not base:
            raise ValueError("openai-like needs OPENAI_BASE_URL (or OPENAI_API_BASE)")
        key = env.get("OPENAI_API_KEY", "not-needed")
        return OpenAILike(
            model=model or served_model(base, key) or "default",
            api_base=base,
            api_key=key,
            is_chat_model=True,
            temperature=0.0,
            max_retries=0,
            context_window=int(env.get("GRAPHRAG_LLM_CONTEXT", "8192")),
        )
    raise ValueError(f"unknown provider {provider!r}; expected one of {PROVIDERS}")


def served_model(base: str, key: str, timeout: float = 3.0) -> str | None:
    """The model an OpenAI-compatible server serves (``GET {base}/models``: vLLM, Ollama
    and llama.cpp's server all answer it), when ``GRAPHRAG_LLM_MODEL`` names none: vLLM
    refuses any other model name, and answers then name the model that wrote them.
    ``None`` (with a warning) when the server does not say."""
    import json
    import urllib.request

    request = urllib.request.Request(
        base.rstrip("/") + "/models", headers={"Authorization": f"Bearer {key}"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as reply:
            models = [m.get("id") for m in json.load(reply).get("data") or []]
    except Exception as exc:  # an older server, a proxy: the request still works by default
        logger.warning(
            "openai-like: %s/models did not name a model (%s); set GRAPHRAG_LLM_MODEL", base, exc
        )
        return None
    models = [m for m in models if m]
    if len(models) > 1:
        logger.info(
            "openai-like: the server serves %s; using %s (GRAPHRAG_LLM_MODEL picks)",
            models,
            models[0],
        )
    return models[0] if models else None


@dataclass(frozen=True)
class LLMChoice:
    """An LLM picked by the rule, and where it came from.

    Attributes:
        source: ``argument``, ``settings``, ``environment``, ``embedded-default`` or ``none``.
    """

    llm: LLM | None
    source: str

    @property
    def tier(self) -> Tier:
        """The tier of the chosen LLM."""
        return llm_tier(self.llm)

    def describe(self) -> str:
        """``OpenAILike(model) from settings``."""
        return f"{describe_llm(self.llm)} from {self.source}"


def choose_llm(llm: LLM | str | None = None) -> LLMChoice:
    """Apply the rule of the module docs to an LLM, a provider name or ``None``.

    A missing embedded model package at step 4 gives LLM-free, with a warning.
    """
    if isinstance(llm, LLM):
        return LLMChoice(llm, "argument")
    if isinstance(llm, str):
        return LLMChoice(llm_for_provider(llm), "argument")
    if llm is not None:
        raise TypeError(f"llm must be a LlamaIndex LLM or a provider name, got {type(llm)!r}")
    from llama_index.core import Settings

    explicit = getattr(Settings, "_llm", None)
    if explicit is not None:
        return LLMChoice(explicit, "settings")
    provider = provider_from_env()
    if provider != "embedded":
        return LLMChoice(llm_for_provider(provider), "environment")
    from ..defaults import MissingModelError

    try:
        return LLMChoice(llm_for_provider("embedded"), "embedded-default")
    except MissingModelError as exc:
        logger.warning("no LLM configured and the embedded one is missing: LLM-free. %s", exc)
        return LLMChoice(None, "none")


def resolve_llm(llm: LLM | str | None = None) -> LLM | None:
    """The LLM :func:`choose_llm` picks (``None``: LLM-free)."""
    return choose_llm(llm).llm
