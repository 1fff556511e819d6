"""A real OpenAI-compatible HTTP server on loopback, for testing LLM clients over a real wire.

* ``WireServer``
  (``server.py``): uvicorn in a daemon thread, its life cycle, faults and counts.
* ``protocol.py``: requests as parsed, replies, faults, records, ``cl100k_base`` counts.
* ``answers.py``: the completion a reply becomes (tool calls, JSON, cuts, SSE chunks).

Example:
    ```python
    with WireServer(lambda req: "Paris") as server:
        llm = OpenAILike(model="m", api_base=server.base_url, api_key=server.api_key)
        assert llm.complete("Capital of France?").text == "Paris"
    ```
"""

from .protocol import Fault, WireRecord, WireReply, WireRequest, count_tokens
from .server import WireServer

__all__ = ["Fault", "WireRecord", "WireReply", "WireRequest", "WireServer", "count_tokens"]
