"""Replies a capable model would write to the suite's prompts, for the loopback wire server.

``ModelReplies`` is a
``WireServer`` responder. It
recognises which of the suite's prompts it was sent (Doc2Query, knowledge
units, decomposition, extraction tuples, ...), reads the passage or question
out of it, and writes a reply grounded in that text: pairs about the passage's
own sentences, units that name the entity instead of "He", entities that occur
in the text. No model is involved: the point is the *form* of the replies.

Text replies come in the shapes real models use, chosen per prompt from a hash
(so a prompt always gets the same reply, and a cached run matches a fresh one):
clean JSON, JSON in a code fence, after a preamble and before commentary,
wrapped under another key (``{"qa_pairs": [...]}``), keyed by number, after a
``<think>`` block; answers as ``Answer: Paris``, ``**Answer:** Paris`` or after
reasoning; yes/no as ``Based on the context, yes.``; unanswered as "I don't
know" or "Not specified". A request with tools or a JSON-schema response
format gets the payload as structured output instead.

``junk`` makes chosen requests get a reply no reader can use, to check that
fallbacks are counted exactly.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .wire import WireReply, WireRequest

__all__ = ["JUNK_REPLY", "ModelReplies", "entities_in", "sentences_in"]

#: What ``junk`` requests get: a polite refusal, no structure at all.
JUNK_REPLY = "I'm sorry, but I can't help with that request."

_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")
_NAME = re.compile(
    r"\b(?:[A-Z][\w'\-]*(?:\s+(?:of|de|the|von|van|and)\s+)?)+[A-Z][\w'\-]*\b|\b[A-Z][\w'\-]{2,}\b"
)
_STOP_STARTS = {"The", "A", "An", "It", "He", "She", "They", "This", "That", "In", "On", "At"}
_PRONOUNS = re.compile(r"^(He|She|It|They|His|Her|Its|Their)\b")
_THIS = re.compile(r"\b(?:this|that|these|the said)\s+(\w+)\b|\b(?:he|she|it|they)\b", re.I)


def sentences_in(text: str) -> list[str]:
    """The sentences of a text (rule-based, as good as a passage needs)."""
    out = []
    for line in text.splitlines():
        out += [s.strip() for s in _SENTENCE.split(line.strip()) if s.strip()]
    return out


def entities_in(text: str) -> list[str]:
    """Capitalised names in a text, in order, each once (a sentence's first word only when named)."""
    found: dict[str, None] = {}
    for match in _NAME.finditer(text):
        name = match.group().strip()
        words = name.split()
        if words[0] in _STOP_STARTS:
            words = words[1:]
        name = " ".join(words)
        if len(name) > 2 and name.lower() not in ("i", "answer", "question"):
            found.setdefault(name, None)
    return list(found)


def _between(text: str, start: str, end: str | None = None, last: bool = True) -> str:
    at = text.rfind(start) if last else text.find(start)
    if at < 0:
        return ""
    body = text[at + len(start) :]
    if end is not None and end in body:
        body = body[: body.index(end)]
    return body.strip()


def _overlap(a: str, b: str) -> int:
    words = {w for w in re.findall(r"\w+", a.lower()) if len(w) > 3}
    return len(words & set(re.findall(r"\w+", b.lower())))


@dataclass
class _Task:
    name: str
    marker: str
    write: Callable[[str], Any]
    kind: str  # json | answer | yesno | list | text


class ModelReplies:
    """A wire responder that answers the suite's prompts like a capable model (see module docs).

    Args:
        styles: ``"varied"`` (the realistic shapes, chosen per prompt) or
            ``"clean"`` (plain JSON and plain answers).
        junk: ``(request, task) -> bool``: requests that get :data:`JUNK_REPLY`.
        seed: Changes which shape each prompt gets.

    Attributes:
        tasks: Requests answered, by task name.
    """

    def __init__(
        self,
        styles: str = "varied",
        junk: Callable[[WireRequest, str], bool] | None = None,
        seed: int = 0,
    ) -> None:
        if styles not in ("varied", "clean"):
            raise ValueError("styles must be 'varied' or 'clean'")
        self.styles, self.junk, self.seed = styles, junk, seed
        self.tasks: Counter[str] = Counter()
        self._lock = threading.Lock()
        # Checked in order: a gleaning prompt repeats the extraction prompt in its history.
        self._table = [
            _Task("doc2query", "You write search questions", self._doc2query, "json"),
            _Task("doc2query-lines", "Q: <question> A: <answer>", self._doc2query_lines, "text"),
            _Task("units", "as a list of knowledge units", self._units, "json"),
            _Task("query-entities", "List the named entities (people", self._cue_entities, "json"),
            _Task("decompose", "fewest sub-questions", self._decompose, "json"),
            _Task("rewrite", "names that entity explicitly", self._rewrite, "answer"),
            _Task("summary", "Summarise in two or three sentences", self._summary, "text"),
            _Task("sufficiency", "answered from the context above alone", self._yes, "yesno"),
            _Task("sub-answer", 'reply "unknown"', self._short_answer, "answer"),
            _Task("answer-integration", "Sub-questions and their answers", self._last, "answer"),
            _Task("glean-check", "left out of the list above? Answer with one", self._no, "yesno"),
            _Task("glean-more", "Write only the missing records", self._done, "text"),
            _Task("extraction", "list its entities and the relationships", self._tuples, "text"),
            _Task("fg-entities", "key noun phrases that the question", self._fg_entities, "list"),
            _Task("fg-questions", "what would you need to know about", self._fg_questions, "list"),
            _Task("fg-summary", "Write a focused summary about", self._fg_summary, "text"),
            _Task("fg-answer", "answer questions from the notes", self._report, "text"),
            _Task("naive-answer", "answer questions from the passages", self._report, "text"),
            _Task("atomic-chunks", "list of atomic statements", self._atomic, "list"),
            _Task("synthetic-queries", "a curious person might ask", self._curious, "list"),
            _Task("judge", "For each criterion pick the better answer", self._verdict, "json"),
        ]

    # ------------------------------------------------------------------ dispatch

    def __call__(self, request: WireRequest) -> WireReply:
        prompt = request.prompt
        task = next((t for t in self._table if t.marker in prompt), None)
        name, kind = (task.name, task.kind) if task else ("answer", "answer")
        with self._lock:
            self.tasks[name] += 1
        if self.junk is not None and self.junk(request, name):
            return WireReply(text=JUNK_REPLY, task=name)
        payload = task.write(prompt) if task else self._short_answer(prompt)
        structured = request.tools or (request.response_format or {}).get("type") in (
            "json_schema",
            "json_object",
        )
        if kind == "json" and structured:
            return WireReply(text="", arguments=payload, task=name)
        return WireReply(text=self._render(kind, name, payload, prompt), task=name)

    def _style(self, prompt: str, n: int) -> int:
        if self.styles == "clean":
            return 0
        digest = hashlib.sha256(f"{self.seed}|{prompt}".encode()).digest()
        return int.from_bytes(digest[:4], "big") % n

    def _render(self, kind: str, name: str, payload: Any, prompt: str) -> str:
        if kind == "json":
            return self._json_text(name, payload, self._style(prompt, 6))
        if kind == "answer":
            forms = (
                "{a}",
                "Answer: {a}",
                "**Answer:** {a}",
                "<think>\nThe context says so.\n</think>\n{a}",
            )
            return forms[self._style(prompt, len(forms))].format(a=payload)
        if kind == "yesno":
            word = "yes" if payload else "no"
            forms = (
                word,
                f"{word.capitalize()}.",
                f"Based on the context, {word}.",
                f"<think>Let me check the context.</think>\n{word.capitalize()}",
            )
            return forms[self._style(prompt, len(forms))]
        if kind == "list":
            items = list(payload)
            style = self._style(prompt, 3)
            if name in ("atomic-chunks", "synthetic-queries"):  # the bracketed format asked for
                lines = [f"[{i}]" for i in items]
                return "\n".join(lines) if style != 1 else "Here you go:\n" + "\n".join(lines)
            if style == 1:
                return "Here is the list:\n" + "\n".join(
                    f"{k}. {i}" for k, i in enumerate(items, 1)
                )
            if style == 2:
                return "\n".join(f"- {i}" for i in items)
            return "\n".join(items)
        return str(payload)

    def _json_text(self, name: str, payload: dict, style: int) -> str:
        """The payload as text, in one of the shapes models write JSON in."""
        (key, items), *_ = payload.items()
        if style == 0:
            return json.dumps(payload)
        if style == 1:
            return f"```json\n{json.dumps(payload, indent=2)}\n```"
        if style == 2:
            return (
                "Sure! Here is the JSON you asked for:\n```json\n"
                f"{json.dumps(payload)}\n```\nLet me know if you need anything else."
            )
        if style == 3 and isinstance(items, list):  # another wrapper key
            return json.dumps({f"{name.replace('-', '_')}_result": items})
        if style == 4 and isinstance(items, list):  # keyed by number
            return json.dumps({str(i): item for i, item in enumerate(items, 1)})
        return f"<think>\nI need to return {key} as JSON.\n</think>\n{json.dumps(payload)}"

    # ------------------------------------------------------------------ QCG

    def _pairs(self, prompt: str) -> list[dict[str, str]]:
        wanted = int(re.search(r"[Ww]rite (\d+)", prompt).group(1))
        passage = _between(prompt, '"""', '"""', last=False) or _between(
            prompt, "Passage:\n", "\n\n"
        )
        sentences = sentences_in(passage) or [passage]
        names = entities_in(passage) or ["the passage"]
        forms = (
            "What does the passage say about {e}?",
            "Which fact involves {e}?",
            "What is stated about {e}?",
            "How is {e} described?",
        )
        pairs: list[dict[str, str]] = []
        k = 0
        while len(pairs) < wanted:
            sentence = sentences[k % len(sentences)]
            here = [e for e in names if e in sentence] or names
            name = here[(k // len(sentences)) % len(here)]
            form = forms[(k // max(1, len(sentences) * len(here))) % len(forms)]
            query = form.format(e=name)
            round_ = k // (len(sentences) * len(here) * len(forms))
            query = query if not round_ else f"{query[:-1]} (detail {round_ + 1})?"
            if all(p["query"] != query for p in pairs):
                pairs.append({"query": query, "answer": sentence.rstrip(".")})
            k += 1
        return pairs

    def _doc2query(self, prompt: str) -> dict:
        return {"pairs": self._pairs(prompt)}

    def _doc2query_lines(self, prompt: str) -> str:
        return "\n".join(f"Q: {p['query']} A: {p['answer']}" for p in self._pairs(prompt))

    # ------------------------------------------------------------------ CUE

    def _units(self, prompt: str) -> dict:
        passage = _between(prompt, "Passage:\n", "\nAnswer:")
        lines = passage.splitlines()
        title = lines[0].strip() if lines else ""
        subject = (entities_in(title) or entities_in(passage) or ["It"])[0]
        units = [_PRONOUNS.sub(subject, s) for s in sentences_in(passage) if s != title]
        return {"units": units or [passage]}

    def _cue_entities(self, prompt: str) -> dict:
        return {"entities": entities_in(_between(prompt, "Question:", "\nAnswer:"))}

    # ------------------------------------------------------------------ ChainRAG

    def _decompose(self, prompt: str) -> dict:
        """Two hops when the question nests one entity in another, else the question itself."""
        question = _between(prompt, "Question:", "\nJSON:")
        nested = re.search(r"\bthe (\w+) (?:which|that|who) ([^?]+)", question)
        if nested:  # "... of the association which published X?"
            noun, clause = nested.group(1), nested.group(2).strip()
            first = f"Which {noun} {clause}?"
            second = question.replace(nested.group(0), f"this {noun}")
            return {"questions": [first, second]}
        owned = re.search(r"\bthe (\w+(?: \w+)?) of ((?:the )?[A-Z][^?,]*)", question)
        if owned:  # "Where was the author of Bambi born?"
            noun, thing = owned.group(1), owned.group(2).strip()
            second = question.replace(owned.group(0), f"this {noun}")
            return {"questions": [f"Who is the {noun} of {thing}?", second]}
        return {"questions": [question]}

    def _rewrite(self, prompt: str) -> str:
        answers = re.findall(r"^A: (.+)$", prompt, re.M)
        question = _between(prompt, "Sub-question:", "\nRewritten:")
        if not answers:
            return question
        rewritten = _THIS.sub(answers[-1].strip(), question, count=1)
        return f"Rewritten question: {rewritten}" if self.styles == "varied" else rewritten

    def _summary(self, prompt: str) -> str:
        context = _between(prompt, '":\n', "\n\nSummarise", last=False)
        return " ".join(context.splitlines()[:2]) or "Nothing relevant was found."

    @staticmethod
    def _yes(prompt: str) -> bool:
        return True

    @staticmethod
    def _no(prompt: str) -> bool:
        return False

    def _short_answer(self, prompt: str) -> str:
        """A short answer: a name from the context sentence that best matches the question."""
        question = _between(prompt, "Question:", "\n") or _between(prompt, "Query:", "\n")
        context = prompt[: prompt.rfind("Question:")] if "Question:" in prompt else prompt
        best = max(sentences_in(context) or [""], key=lambda s: _overlap(question, s))
        names = [e for e in entities_in(best) if e.lower() not in question.lower()]
        if names and _overlap(question, best):
            return names[0]
        unknown = ("unknown", "I don't know.", "Not specified in the context.")
        return unknown[self._style(prompt, len(unknown))]

    @staticmethod
    def _last(prompt: str) -> str:
        answers = re.findall(r"-> (.+)$", prompt, re.M)
        return answers[-1].strip() if answers else "unknown"

    # ------------------------------------------------------------------ FG-RAG

    def _tuples(self, prompt: str) -> str:
        """Entity and relationship records with short descriptions, as extraction models write."""
        text = _between(prompt, "Text:", "\nOutput:")
        records, seen = [], set()
        for sentence in sentences_in(text):
            gist = " ".join(sentence.split()[:6]).rstrip(".,;")
            names = [e for e in entities_in(sentence) if e not in seen][:3]
            for name in names:
                seen.add(name)
                records.append(f'("entity"<|>{name}<|>thing<|>Named in: {gist}.)')
            for a, b in zip(names, names[1:], strict=False):
                records.append(f'("relationship"<|>{a}<|>{b}<|>Both in: {gist}.<|>co-mention)')
        return "##\n".join(records) + "\n<|DONE|>"

    @staticmethod
    def _done(prompt: str) -> str:
        return "<|DONE|>"

    @staticmethod
    def _fg_entities(prompt: str) -> list[str]:
        question = _between(prompt, "Question:", "\nEntities:")
        return entities_in(question) or [w for w in re.findall(r"[a-z]{5,}", question)][:3]

    @staticmethod
    def _fg_questions(prompt: str) -> list[str]:
        limit = int(re.search(r"at most (\d+)", prompt).group(1))
        entity = _between(prompt, 'know about "', '"', last=False)
        forms = (
            "What is {e}?",
            "Where is {e} found?",
            "Who deals with {e}?",
            "Why does {e} matter?",
        )
        return [f.format(e=entity) for f in forms][:limit]

    @staticmethod
    def _fg_summary(prompt: str) -> str:
        entity = _between(prompt, "focused summary about ", ",", last=False)
        info = [
            ln.lstrip("- ")
            for ln in _between(prompt, "Information:\n", "\n\nQuestions:").splitlines()
        ]
        return f"## {entity}\n\n" + " ".join(info[:4])

    @staticmethod
    def _report(prompt: str) -> str:
        notes = _between(prompt, "Notes:\n", "\n\nQuestion:") or _between(
            prompt, "Passages:\n", "\n\nQuestion:"
        )
        body = " ".join(ln.strip("# ") for ln in notes.splitlines() if ln.strip())[:600]
        return f"## Answer\n\n{body or 'The notes do not answer the question.'}"

    # ------------------------------------------------------------------ LP-RAG

    @staticmethod
    def _atomic(prompt: str) -> list[str]:
        paragraph = _between(prompt, "Paragraph:\n", "\nAnswer:")
        subject = (entities_in(paragraph) or ["It"])[0]
        return [_PRONOUNS.sub(subject, s) for s in sentences_in(paragraph)]

    @staticmethod
    def _curious(prompt: str) -> list[str]:
        wanted = int(re.search(r"Write (\d+) different questions", prompt).group(1))
        passages = re.findall(
            r"^\[Passage \d+\] (.+)$", _between(prompt, "Passages:\n", "\nAnswer:"), re.M
        )
        names = entities_in(" ".join(passages)) or ["the passages"]
        forms = (
            "What is known about {e}?",
            "How is {e} connected to the others?",
            "When did {e} matter?",
        )
        return [forms[i % len(forms)].format(e=names[i % len(names)]) for i in range(wanted)]

    # ------------------------------------------------------------------ judge

    @staticmethod
    def _verdict(prompt: str) -> dict:
        one = _between(prompt, "Answer 1:\n", "\n\nAnswer 2:")
        two = _between(prompt, "Answer 2:\n", "\n\nReply with")
        winner = 1 if len(one) >= len(two) else 2
        reason = "It covers more of the question."
        return {
            c: {"winner": winner, "reason": reason}
            for c in ("comprehensiveness", "diversity", "empowerment", "overall")
        }
