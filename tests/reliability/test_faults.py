"""A failing LLM during indexing: every LLM-using component finishes, records, and resumes.

The faulty LLM is a seeded ``ScriptedLLM`` callable: each (prompt, attempt)
pair draws its fate from a hash, so the same calls fail in every run whatever
the concurrency order. Fates: a server error, a 429 rate limit, a timeout (a
hang the retry policy cuts, or a raised ``TimeoutError``), a junk answer, or
the healthy answer. With ``max_attempts=3`` errors are retried; junk is not
an error and is counted as unusable.

For each component the suite checks that the faulty run finishes, that the
component's own records match what the script did, and that a rerun with a
healthy LLM and the same ``LLMCache`` file makes exactly the calls the faulty
run did not complete (no successful call repeated) and yields the same index
as a clean build, with no duplicate node.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections import Counter
from dataclasses import dataclass, field

import pytest
from llama_index.core.schema import Document
from support import Delay, ScriptedLLM

from llama_index_graphrag_ext.core.llm import RetryPolicy
from llama_index_graphrag_ext.core.nodes import PassageParser

TEXTS = {
    "curie": "Marie Curie was a physicist born in Warsaw. Marie Curie won two Nobel Prizes.",
    "warsaw": "Warsaw is the capital of Poland. Warsaw lies on the river Vistula.",
    "paris": "Paris is the capital of France. The Seine flows through Paris.",
    "seine": "The Seine is a river in northern France. The Seine reaches the English Channel.",
    "tea": "Green tea is made from unoxidised leaves. Tea is popular in Japan and China.",
    "japan": "Japan is an island country in East Asia. Tokyo is the capital of Japan.",
    "crux": "Crux is an American comic book. Crux was published by CrossGen Entertainment.",
    "crossgen": "CrossGen Entertainment was a comic book publisher based in Florida.",
    "nile": "The Nile is a river in Africa. The Nile flows through Egypt and Sudan.",
    "cairo": "Cairo is the capital of Egypt. Cairo lies on the river Nile.",
}
DOCS = [Document(id_=k, text=v, metadata={"title": k}) for k, v in TEXTS.items()]
JUNK = ("", "<html><body>502 Bad Gateway</body></html>")
TIMEOUT = 0.25  # seconds per attempt in the components that take a timeout


class RateLimitError(Exception):
    """What an HTTP client raises on a 429."""

    status_code = 429


class ServerError(Exception):
    """What an HTTP client raises on a 500."""

    status_code = 500


def sentences_of(text: str) -> list[str]:
    return [s.strip() + "." for s in text.split(". ") if s.strip(". ")]


def docs_in(prompt: str) -> list[str]:
    """The corpus texts a prompt is about, in corpus order."""
    return [t for t in TEXTS.values() if t[:40] in prompt or t[:40] in " ".join(prompt.split())]


@dataclass
class FaultyLLM:
    """The fault script: ``llm()`` gives a ``ScriptedLLM`` driven by :meth:`answer`.

    Attributes:
        healthy: ``prompt -> answer`` of a working model.
        seed: Changes which calls fail.
        hang: Time out by hanging (cut by the component's timeout) rather than raising.
        junk: Junk answers to draw from.
    """

    healthy: object
    seed: int = 0
    hang: bool = True
    junk: tuple[str, ...] = JUNK
    rates: tuple[tuple[str, float], ...] = (
        ("error", 0.15),
        ("rate_limit", 0.15),
        ("timeout", 0.10),
        ("junk", 0.10),
    )
    attempts: Counter = field(default_factory=Counter)
    fates: dict = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def fate(self, prompt: str, attempt: int) -> str:
        digest = hashlib.sha256(f"{self.seed}|{attempt}|{prompt}".encode()).digest()
        u = int.from_bytes(digest[:8], "big") / 2**64
        for name, rate in self.rates:
            if u < rate:
                return name
            u -= rate
        return "ok"

    def answer(self, prompt: str):
        with self._lock:
            attempt = self.attempts[prompt]
            self.attempts[prompt] += 1
            fate = self.fate(prompt, attempt)
            self.fates.setdefault(prompt, []).append(fate)
        if fate == "error":
            return ServerError("500 Internal Server Error")
        if fate == "rate_limit":
            return RateLimitError("429 Too Many Requests: slow down")
        if fate == "timeout":
            return Delay(30.0, "too late") if self.hang else TimeoutError("read timed out")
        if fate == "junk":
            return self.junk[attempt % len(self.junk)]
        return self.healthy(prompt)

    def llm(self) -> ScriptedLLM:
        return ScriptedLLM(self.answer, model_name="faulty-then-healthy")

    def outcome(self, prompt: str) -> str:
        """``ok``, ``junk`` or ``failed`` (retries used up) for a prompt of the faulty run."""
        last = self.fates[prompt][-1]
        return last if last in ("ok", "junk") else "failed"

    def junk_of(self, prompt: str) -> str:
        """The junk answer a prompt whose outcome is ``junk`` got last."""
        return self.junk[(len(self.fates[prompt]) - 1) % len(self.junk)]

    def ok_prompts(self) -> set[str]:
        return {p for p in self.fates if self.outcome(p) == "ok"}

    def count(self, outcome: str) -> int:
        return sum(self.outcome(p) == outcome for p in self.fates)

    def retried(self) -> int:
        """Attempts that failed with an error and were followed by another attempt."""
        return sum(len(f) - 1 for f in self.fates.values())


@pytest.fixture(autouse=True)
def no_backoff(monkeypatch):
    """Retry at once: the waits are the policy's business, not this suite's."""
    monkeypatch.setattr(RetryPolicy, "backoff", lambda self, attempt: 0.0)


def healthy_llm(healthy) -> ScriptedLLM:
    return ScriptedLLM(healthy, model_name="faulty-then-healthy")


def check_resume(
    faulty: FaultyLLM, rerun: ScriptedLLM, clean: ScriptedLLM, answered: set[str] | None = None
) -> None:
    """The rerun asked exactly what the faulty run left unanswered, nothing it answered."""
    ok = faulty.ok_prompts() if answered is None else answered
    assert ok and len(ok) < len(set(clean.calls)), "the seed must leave some calls unanswered"
    assert set(rerun.calls).isdisjoint(ok)
    assert rerun.call_count == len(set(clean.calls) - ok)


def assert_faults_happened(faulty: FaultyLLM) -> None:
    seen = Counter(f for fates in faulty.fates.values() for f in fates)
    for fate in ("error", "rate_limit", "timeout", "junk", "ok"):
        assert seen[fate] > 0, f"seed gives no {fate!r}: {seen}"
    assert faulty.count("failed") + faulty.count("junk") > 0


# --------------------------------------------------------------------------- QCG


def qcg_answer(prompt: str) -> str:
    pairs = []
    for text in docs_in(prompt):
        for i, sentence in enumerate(sentences_of(text)):
            subject = sentence.split()[0]
            pairs.append({"query": f"What is said about {subject} ({i})?", "answer": sentence})
    return json.dumps(pairs)


def qcg_index(llm, cache, hash_embed):
    from llama_index_graphrag_ext.qcg import Doc2QueryGenerator, QueryCentricGraphIndex

    generator = Doc2QueryGenerator(
        llm=llm,
        embed_model=hash_embed,
        num_pairs=4,
        alpha=1.0,
        repair_attempts=0,
        max_attempts=3,
        timeout=TIMEOUT,
        cache_path=cache,
    )
    return QueryCentricGraphIndex.from_documents(
        DOCS, embed_model=hash_embed, transformations=[PassageParser()], generator=generator
    )


def qcg_nodes(index) -> list[tuple[str, str, str, str]]:
    return sorted((p.chunk_id, p.kind, p.query, p.answer) for p in index.layer.pairs)


def test_qcg_doc2query_survives_faults_and_resumes_from_the_cache(hash_embed, tmp_path):
    cache = str(tmp_path / "llm.sqlite")
    faulty = FaultyLLM(qcg_answer, seed=2)
    index = qcg_index(faulty.llm(), cache, hash_embed)
    assert_faults_happened(faulty)
    stats = index.build_stats
    unusable = faulty.count("failed") + faulty.count("junk")
    assert stats["fallback_chunks"] == unusable
    record = index.llm_steps.record("doc2query")  # persisted with the index
    assert (record.items, record.fallbacks) == (len(DOCS), unusable)
    meter = index.generator.usage
    assert meter.failures == faulty.count("failed")
    assert meter.retries == faulty.retried()
    assert len(index) == len(DOCS)  # fallback chunks got sentence nodes: all retrievable
    assert not stats.get("chunks_without_query_nodes")

    rerun_llm, clean_llm = healthy_llm(qcg_answer), healthy_llm(qcg_answer)
    rerun = qcg_index(rerun_llm, cache, hash_embed)
    clean = qcg_index(clean_llm, None, hash_embed)
    check_resume(faulty, rerun_llm, clean_llm)
    assert rerun.build_stats["fallback_chunks"] == 0
    assert qcg_nodes(rerun) == qcg_nodes(clean)
    ids = [p.node_id for p in rerun.layer.pairs]
    assert len(ids) == len(set(ids))


# --------------------------------------------------------------------------- CUE


def cue_answer(prompt: str) -> str:
    passage = prompt.rsplit("Passage:", 1)[-1] if "Passage:" in prompt else prompt
    units = [s for t in docs_in(passage) for s in sentences_of(t)]
    return json.dumps({"units": units or ["The passage says nothing."]})


def cue_index(llm, cache, hash_embed):
    from llama_index_graphrag_ext.cue import KnowledgeUnitExtractor, MultiPartiteIndex

    extractor = KnowledgeUnitExtractor(
        alpha=1.0,
        llm=llm,
        repair_attempts=0,
        max_attempts=3,
        timeout=TIMEOUT,
        cache_path=cache,
    )
    return MultiPartiteIndex.from_documents(
        DOCS, embed_model=hash_embed, transformations=[PassageParser()], extractor=extractor
    )


def cue_units(index) -> list[tuple[str, str]]:
    g = index.graph
    return sorted((u, g.node_attrs(u)["source"]) for u in g.nodes("unit"))


def test_cue_unit_extraction_survives_faults_and_resumes_from_the_cache(hash_embed, tmp_path):
    cache = str(tmp_path / "llm.sqlite")
    faulty = FaultyLLM(cue_answer, seed=0)
    index = cue_index(faulty.llm(), cache, hash_embed)
    assert_faults_happened(faulty)
    stats = index.build_stats
    unusable = faulty.count("failed") + faulty.count("junk")
    assert stats["chunks_fallback"] == unusable
    assert stats["chunks_llm"] == len(DOCS) - unusable
    usage = index.extractor.usage
    assert usage.failures == faulty.count("failed")
    assert usage.parse_failures == faulty.count("junk")
    assert usage.retries == faulty.retried()

    rerun_llm, clean_llm = healthy_llm(cue_answer), healthy_llm(cue_answer)
    rerun = cue_index(rerun_llm, cache, hash_embed)
    clean = cue_index(clean_llm, None, hash_embed)
    check_resume(faulty, rerun_llm, clean_llm)
    assert rerun.build_stats["chunks_fallback"] == 0
    assert cue_units(rerun) == cue_units(clean)
    assert rerun.stats() == clean.stats() | {"extraction": rerun.stats()["extraction"]}


# --------------------------------------------------------------------------- LP-RAG


def atomic_answer(prompt: str) -> str:
    return "\n".join(f"[{s}]" for t in docs_in(prompt) for s in sentences_of(t))


def query_answer(prompt: str) -> str:
    subjects = [t.split()[0] for t in docs_in(prompt)] or ["these passages"]
    return f"[What is known about {subjects[0]}?]\n[How is {subjects[-1]} described here?]"


def lprag_answer(prompt: str) -> str:
    return query_answer(prompt) if "questions" in prompt.lower() else atomic_answer(prompt)


def lprag_index(llm, cache, hash_embed):
    from llama_index_graphrag_ext.lprag import ChunkQueryLinkIndex, LLMAtomicChunker

    chunker = LLMAtomicChunker(llm=llm, max_attempts=3, timeout=TIMEOUT, cache_path=cache)
    index = ChunkQueryLinkIndex.from_documents(
        DOCS,
        embed_model=hash_embed,
        llm=llm,
        transformations=[chunker],
        config="paper",
        cache_path=cache,
        hidden=16,
        epochs=3,
        threads=1,
        k=2,
        M=2,
    )
    return index, chunker


def test_lprag_chunker_and_synthetic_queries_survive_faults_and_resume(hash_embed, tmp_path):
    cache = str(tmp_path / "llm.sqlite")
    # The synthetic-query step keeps the default 120 s timeout: timeouts are raised here.
    faulty = FaultyLLM(lprag_answer, seed=0, hang=False, junk=("",))
    index, chunker = lprag_index(faulty.llm(), cache, hash_embed)
    assert_faults_happened(faulty)
    chunk_prompts = [p for p in faulty.fates if "questions" not in p.lower()]
    query_prompts = [p for p in faulty.fates if "questions" in p.lower()]
    unusable = sum(faulty.outcome(p) != "ok" for p in chunk_prompts)
    assert chunker.stats["fallback_paragraphs"] == unusable
    assert chunker.stats["failures"] == sum(faulty.outcome(p) == "failed" for p in chunk_prompts)
    stats = index.build_stats
    assert stats["llm_failed_calls"] == sum(faulty.outcome(p) == "failed" for p in query_prompts)
    assert stats["llm_unusable_answers"] == sum(faulty.outcome(p) == "junk" for p in query_prompts)
    assert stats["pseudo_queries"] > 0  # failed batches fell back to pseudo-queries

    rerun_llm, clean_llm = healthy_llm(lprag_answer), healthy_llm(lprag_answer)
    rerun, _ = lprag_index(rerun_llm, cache, hash_embed)
    clean, _ = lprag_index(clean_llm, None, hash_embed)
    check_resume(faulty, rerun_llm, clean_llm)
    assert rerun.chunk_ids() == clean.chunk_ids()
    assert len(set(rerun.chunk_ids())) == len(rerun)
    assert sorted(q["text"] for q in rerun.queries()) == sorted(q["text"] for q in clean.queries())
    assert rerun.build_stats["pseudo_queries"] == 0


# --------------------------------------------------------------------------- FG-RAG


def fgrag_answer(prompt: str) -> str:
    if "Answer with one word" in prompt:
        return "NO"
    text = prompt.rsplit("Text:", 1)[-1]
    records = []
    for doc in docs_in(text):
        names = list(dict.fromkeys(re.findall(r"\b[A-Z][a-z]+(?: [A-Z][a-z]+)*", doc)))[:3]
        for name in names:
            records.append(f'("entity"<|>{name}<|>thing<|>{name} appears in: {doc})')
        if len(names) > 1:
            records.append(f'("relationship"<|>{names[0]}<|>{names[1]}<|>{doc}<|>mention)')
    return "##".join(records) + "<|COMPLETE|>"


def fgrag_index(llm, cache, hash_embed):
    from llama_index_graphrag_ext.fgrag import FGRAGExtractor, FGRAGIndex

    extractor = FGRAGExtractor(
        llm=llm, max_attempts=3, timeout=TIMEOUT, cache_path=cache, max_gleanings=1
    )
    index = FGRAGIndex.from_documents(
        DOCS, embed_model=hash_embed, transformations=[PassageParser()], kg_extractors=[extractor]
    )
    return index, extractor


def fgrag_entities(index) -> list[tuple[str, tuple[str, ...]]]:
    graph = index.graph_snapshot()
    return sorted(
        (graph.name(i), tuple(t for t, _ in graph.descriptions(i))) for i in range(len(graph))
    )


def test_fgrag_extraction_survives_faults_and_resumes_from_the_cache(hash_embed, tmp_path):
    cache = str(tmp_path / "llm.sqlite")
    faulty = FaultyLLM(fgrag_answer, seed=0)
    index, extractor = fgrag_index(faulty.llm(), cache, hash_embed)
    assert_faults_happened(faulty)
    extract_prompts = [p for p in faulty.fates if "Answer with one word" not in p]
    unusable = sum(faulty.outcome(p) != "ok" for p in extract_prompts)
    check_prompts = [p for p in faulty.fates if "Answer with one word" in p]
    # A chunk falls back when its extraction fails for good; a gleaning check that fails
    # (an error, or an empty reply) only ends the gleaning: the extraction stands.
    empty = {p for p in check_prompts if faulty.outcome(p) == "junk" and not faulty.junk_of(p)}
    failed_checks = sum(faulty.outcome(p) == "failed" for p in check_prompts) + len(empty)
    assert extractor.stats["fallback_chunks"] == unusable
    assert extractor.stats.get("glean_checks_failed", 0) == failed_checks
    assert extractor.usage.failures == faulty.count("failed")
    assert extractor.usage.retries == faulty.retried()
    assert index.stats()["chunks"] == len(DOCS)

    rerun_llm, clean_llm = healthy_llm(fgrag_answer), healthy_llm(fgrag_answer)
    rerun, rerun_ex = fgrag_index(rerun_llm, cache, hash_embed)
    clean, _ = fgrag_index(clean_llm, None, hash_embed)
    # A junk YES/NO check reads as NO and is cached like any answer: it was answered
    # (an empty one is no answer: asked again).
    junk_checks = {p for p in check_prompts if faulty.outcome(p) == "junk"} - empty
    check_resume(faulty, rerun_llm, clean_llm, faulty.ok_prompts() | junk_checks)
    assert rerun_ex.stats["fallback_chunks"] == 0
    assert fgrag_entities(rerun) == fgrag_entities(clean)
