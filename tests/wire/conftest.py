"""The ``wire_server`` fixture: a real OpenAI-compatible server on loopback, one per test.

Set what the "model" answers either through indirect parametrization::

    @pytest.mark.parametrize("wire_server", [lambda req: "Paris"], indirect=True)
    def test_x(wire_server): ...

(a dict parameter is passed as ``WireServer`` keyword arguments instead), or
inside the test with ``wire_server.responder = fn``.
"""

from __future__ import annotations

import pytest

from llama_index_graphrag_ext.testing.wire import WireServer


@pytest.fixture
def wire_server(request):
    """A started [`WireServer`][llama_index_graphrag_ext.testing.wire.WireServer], stopped after the test.

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
