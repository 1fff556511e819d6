"""Which LLM each step of a component used, in which tier, and every fallback.

Each LLM step has an LLM-free stand-in. A whole step falls back when it is
*planned* without a capable LLM (no LLM, or JSON asked of the embedded SmolLM2);
single items fall back when their call fails or the reply stays unusable. Both
log a WARNING and are recorded; ``on_llm_failure="raise"`` turns them into
:class:`LLMFallbackError`. Records persist with an index.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from .resolve import LLMChoice, llm_identity, writes_json

logger = logging.getLogger(__name__)

__all__ = [
    "ON_LLM_FAILURE",
    "LLMFallbackError",
    "LLMSteps",
    "StepRecord",
    "check_on_failure",
    "fallback_share",
    "reason_of",
]

OnFailure = Literal["fallback", "raise"]
#: Values of every component's ``on_llm_failure``.
ON_LLM_FAILURE = ("fallback", "raise")


class LLMFallbackError(RuntimeError):
    """An LLM step would fall back to its stand-in and ``on_llm_failure="raise"`` forbids it."""


@dataclass
class StepRecord:
    """One LLM step of a component.

    Attributes:
        tier: ``full-llm``, ``embedded-llm`` or ``llm-free``.
        source: Where the LLM came from (see :class:`.resolve.LLMChoice`).
        stand_in: What runs instead when the LLM cannot.
        note: Why the step runs LLM-free, when it does.
        fallbacks: Items that got the stand-in although the step had an LLM.
    """

    step: str
    tier: str
    llm_class: str | None = None
    model: str | None = None
    source: str | None = None
    stand_in: str = ""
    note: str = ""
    items: int = 0
    fallbacks: int = 0
    reasons: Counter[str] = field(default_factory=Counter)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        data = {k: v for k, v in vars(self).items() if k != "reasons"}
        data["reasons"] = dict(self.reasons)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StepRecord:
        """Inverse of :meth:`to_dict`."""
        data = dict(data)
        reasons = Counter(data.pop("reasons", {}) or {})
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known, reasons=reasons)


def check_on_failure(value: str) -> OnFailure:
    """``value`` if it is a valid ``on_llm_failure``, else ValueError."""
    if value not in ON_LLM_FAILURE:
        raise ValueError(f"on_llm_failure must be one of {ON_LLM_FAILURE}, got {value!r}")
    return value  # type: ignore[return-value]


def reason_of(exc: BaseException) -> str:
    """A short reason for a failed item, for fallback counts (``HTTP 500``, ``timeout``, ...)."""
    from .parse import LLMOutputError
    from .retry import is_retryable, status_of
    from .target import LLMRequestError, LLMStreamError, LLMTruncatedError

    if isinstance(exc, LLMTruncatedError):
        return "reply cut by the length limit"
    if isinstance(exc, LLMRequestError):
        status = status_of(exc.__cause__) if exc.__cause__ is not None else None
        return f"{exc.kind} (HTTP {status})" if status else exc.kind
    if isinstance(exc, LLMStreamError):
        return "stream broken"
    if isinstance(exc, LLMOutputError):
        return "empty reply" if str(exc).startswith("empty") else "unusable reply"
    status = status_of(exc)
    if status is not None:
        return f"HTTP {status}"
    if isinstance(exc, (TimeoutError,)) or "Timeout" in type(exc).__name__:
        return "timeout"
    if is_retryable(exc):
        return "connection error"
    return type(exc).__name__


class LLMSteps:
    """The step ledger of one component (``owner``: its name for logs); thread-safe."""

    def __init__(self, owner: str) -> None:
        self.owner = owner
        self._records: dict[str, StepRecord] = {}
        self._lock = threading.Lock()

    def plan(
        self,
        step: str,
        choice: LLMChoice,
        *,
        needs: Literal["json", "text"],
        stand_in: str,
        on_failure: OnFailure = "fallback",
    ) -> Any:
        """Decide the tier of ``step`` once; return the LLM to use, or ``None`` for the stand-in.

        Args:
            needs: ``json`` for steps that need structured output, ``text`` otherwise.
            stand_in: What runs when the step is LLM-free (said in logs and stats).

        Raises:
            LLMFallbackError: The LLM cannot do the step and ``on_llm_failure="raise"``.
        """
        llm = choice.llm
        ident = llm_identity(llm)
        record = StepRecord(
            step,
            ident["tier"],
            ident["class"],
            ident["model"],
            choice.source,
            stand_in,
        )
        note = ""
        if llm is None:
            note = "no LLM resolved (provider 'none')"
        elif needs == "json" and not writes_json(llm):
            note = (
                f"{ident['class']}({ident['model']}) is the embedded SmolLM2 and cannot write JSON"
            )
        if note:
            record.tier, record.note = "llm-free", note
            message = f"{self.owner} {step}: {note}; runs LLM-free ({stand_in})"
            if on_failure == "raise" and llm is not None:
                raise LLMFallbackError(message + " and on_llm_failure='raise'")
            (logger.warning if llm is not None else logger.info)(message)
            llm = None
        with self._lock:
            old = self._records.get(step)
            if old is not None:  # a step planned again (a rebuilt stage) keeps its counts
                record.items, record.fallbacks, record.reasons = (
                    old.items,
                    old.fallbacks,
                    old.reasons,
                )
            self._records[step] = record
        return llm

    def chose_llm_free(self, step: str, stand_in: str, note: str) -> None:
        """Record that ``step`` runs its stand-in by the user's choice (``note`` says which)."""
        with self._lock:
            old = self._records.get(step)
            record = StepRecord(step, "llm-free", stand_in=stand_in, note=note, source="choice")
            if old is not None:
                record.items, record.fallbacks, record.reasons = (
                    old.items,
                    old.fallbacks,
                    old.reasons,
                )
            self._records[step] = record

    def count(self, step: str, items: int) -> None:
        """Count items handled by ``step`` (with the LLM or by the planned stand-in)."""
        with self._lock:
            self._require(step).items += int(items)

    def fell_back(
        self,
        step: str,
        reasons: Iterable[str],
        *,
        what: str = "item",
        on_failure: OnFailure = "fallback",
    ) -> None:
        """Record that some items of ``step`` got the stand-in; one WARNING with the counts.

        Args:
            reasons: One short reason per item that fell back.
            what: The item's name for the log (``chunk``, ``query``, ...).

        Raises:
            LLMFallbackError: With ``on_llm_failure="raise"``.
        """
        counted = Counter(reasons)
        n = sum(counted.values())
        if not n:
            return
        with self._lock:
            record = self._require(step)
            record.fallbacks += n
            record.reasons.update(counted)
            total = max(record.items, record.fallbacks)
        why = ", ".join(f"{reason} x{k}" for reason, k in counted.most_common())
        message = (
            f"{self.owner} {step}: {n} {what}(s) fell back to {record.stand_in} ({why}); "
            f"{record.fallbacks} of {total} so far"
        )
        if on_failure == "raise":
            raise LLMFallbackError(message + " and on_llm_failure='raise'")
        logger.warning(message)

    def _require(self, step: str) -> StepRecord:
        if step not in self._records:
            raise KeyError(f"{self.owner}: step {step!r} was never planned")
        return self._records[step]

    def record(self, step: str) -> StepRecord | None:
        """The record of ``step`` (``None`` when not planned)."""
        with self._lock:
            return self._records.get(step)

    def records(self) -> list[StepRecord]:
        """Every step's record, in planning order."""
        with self._lock:
            return list(self._records.values())

    def to_dict(self) -> dict[str, dict[str, Any]]:
        """``{step: record}``, JSON-ready (what indexes persist)."""
        return {r.step: r.to_dict() for r in self.records()}

    def load(self, data: dict[str, dict[str, Any]] | None) -> LLMSteps:
        """Take records persisted by :meth:`to_dict` (after a load); returns this ledger."""
        with self._lock:
            for step, record in (data or {}).items():
                self._records[step] = StepRecord.from_dict(record)
        return self

    def summary(self) -> str:
        """One line per step: ``step: tier LLM, items, fallbacks``."""
        lines = []
        for r in self.records():
            who = f"{r.llm_class}({r.model})" if r.llm_class else "no LLM"
            line = f"{r.step}: {r.tier} ({who}), {r.items} item(s), {r.fallbacks} fallback(s)"
            if r.note:
                line += f" [{r.note}]"
            lines.append(line)
        return "\n".join(lines)


def fallback_share(records: Iterable[StepRecord | dict[str, Any]]) -> tuple[int, int]:
    """``(fallbacks, items)`` summed over the full-tier steps of ``records``."""
    fallbacks = items = 0
    for r in records:
        r = StepRecord.from_dict(r) if isinstance(r, dict) else r
        if r.tier == "full-llm":
            fallbacks += r.fallbacks
            items += max(r.items, r.fallbacks)
    return fallbacks, items
