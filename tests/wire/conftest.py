"""The ``wire_server`` fixture: a real OpenAI-compatible server on loopback, one per test.

Set what the "model" answers either through indirect parametrization::

    @pytest.mark.parametrize("wire_server", [lambda req: "Paris"], indirect=True)
    def test_x(wire_server): ...

(a dict parameter is passed as ``WireServer`` keyword arguments instead), or
inside the test with ``wire_server.responder = fn``.
"""

from __future__ import annotations

import pytest
from support.wire import WireServer


@pytest.fixture
def wire_server(request):
    """A started [`WireServer`][llama_index_graphrag_ext.testing.wire.server.WireServer], stopped after the test.

    A responder that raised fails the test at teardown (the client only saw a
    500): a test that provokes one on purpose clears ``wire_server.errors``.
    """
    param = getattr(request, "param", None)
    kwargs = dict(param) if isinstance(param, dict) else {"responder": param}
    server = WireServer(**kwargs).start()
    try:
        yield server
    finally:
        server.stop()
    if server.errors:
        raise server.errors[0]


# --------------------------------------------------------------------------- the suite on the wire


@pytest.fixture
def model_server(wire_server):
    """``wire_server`` answering the suite's prompts like a capable model (``ModelReplies``).

    ``model_server.responder`` is the :class:`ModelReplies`: its ``junk``
    predicate makes chosen requests get an unusable reply, its ``tasks``
    counts what was asked.
    """
    from support.replies import ModelReplies

    wire_server.responder = ModelReplies()
    return wire_server


@pytest.fixture(params=["openai-like", "openai"])
def wire_llm(request, model_server):
    """A client of ``model_server``: ``OpenAILike`` (JSON read from text) and ``OpenAI`` with a
    base URL (``gpt-4o-mini``: native structured output), each with its own client retries
    left on, as users build them (the suite's caller turns them off in its copy)."""
    if request.param == "openai-like":
        from llama_index.llms.openai_like import OpenAILike

        return OpenAILike(
            model="wire-model",
            api_base=model_server.base_url,
            api_key=model_server.api_key,
            is_chat_model=True,
            context_window=16000,
            timeout=10.0,
        )
    from llama_index.llms.openai import OpenAI

    return OpenAI(
        model="gpt-4o-mini",
        api_base=model_server.base_url,
        api_key=model_server.api_key,
        timeout=10.0,
    )


@pytest.fixture(params=["argument", "settings"])
def how(request):
    """How a component gets its LLM: ``llm=`` (``argument``) or only ``Settings.llm``."""
    from llama_index.core import Settings

    yield request.param
    Settings._llm = None  # never leave a test's LLM behind


@pytest.fixture
def give_llm(how):
    """``give_llm(llm)``: the keyword arguments handing ``llm`` to a component the ``how`` way
    (``{"llm": llm}``, or ``{}`` after setting ``Settings.llm``)."""
    from llama_index.core import Settings

    def give(llm) -> dict:
        if how == "argument":
            return {"llm": llm}
        Settings.llm = llm
        return {}

    return give


# --------------------------------------------------------------------------- ledger checks


@pytest.fixture
def ran_on_the_wire(wire_llm, how):
    """``check(record)``: a ledger record says its step ran in the full tier on ``wire_llm``,
    handed over the ``how`` way."""

    def check(record) -> None:
        assert (record.tier, record.llm_class, record.model, record.source) == (
            "full-llm",
            type(wire_llm).__name__,
            wire_llm.model,
            how,
        )

    return check


@pytest.fixture
def persisted_ledger():
    """``check(index, folder, **load_kwargs)``: persist ``index``, load it back, and check the
    ledger survived in both the loaded index and ``manifest.json``; returns (loaded, manifest)."""
    import json

    def check(index, folder, **load_kwargs):
        index.persist(folder)
        loaded = type(index).load(folder, **load_kwargs)
        manifest = json.loads((folder / "manifest.json").read_text())
        assert loaded.llm_steps.to_dict() == index.llm_steps.to_dict() == manifest["llm_steps"]
        return loaded, manifest

    return check


class Stalls:
    """Attempts the suite retried because no answer came in time, read from its log.

    On a loaded machine a loopback request can, rarely, go unanswered past the time-out
    (seen once in CI: one request of four, 60 s). Retrying it is the right behaviour,
    and the server may or may not have answered the abandoned attempt, so its exact
    counts allow one extra request of any status per stall, and no more.
    """

    def __init__(self, caplog) -> None:
        self.caplog = caplog

    def __call__(self) -> int:
        retried = [r.getMessage() for r in self.caplog.records]
        return sum("; retrying in" in m and "no answer within" in m for m in retried)

    def counts(self, by_status: dict, expected: dict, since: int = 0) -> bool:
        """``by_status`` is ``expected`` plus at most one request per stall after the
        first ``since`` (those before the server's last ``reset()``)."""
        extra = [by_status.get(s, 0) - expected.get(s, 0) for s in {*by_status, *expected}]
        return min(extra, default=0) >= 0 and sum(extra) <= self() - since


@pytest.fixture
def stalls(caplog) -> Stalls:
    """A [`Stalls`][] reader of this test's LLM call log."""
    import logging

    caplog.set_level(logging.WARNING, logger="llama_index_graphrag_ext.core.llm.calls")
    return Stalls(caplog)
