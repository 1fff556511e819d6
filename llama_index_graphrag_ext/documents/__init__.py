"""Your own documents: index a folder of files with any method, update it, query it.

The ``graphrag-ext index``, ``query`` and ``info`` commands (see
``docs/own-documents.md``):

* :mod:`.reading`: files to one ``Document`` each (path = id, content hash);
* :mod:`.methods`: every registered method as a persistent, updatable index;
* :mod:`.baselines`: ``dense`` and ``bm25`` made persistent and updatable;
* :mod:`.collection`: the index folder's layout and ``collection.json``;
* :mod:`.indexing`, :mod:`.querying`: the commands.
"""

from .._lazy import lazy_exports

#: Public name -> the module defining it, imported on first use (see ``_lazy``).
_EXPORTS = {
    "UserError": ".errors",
    "IndexRequest": ".indexing",
    "run_index": ".indexing",
    "run_info": ".querying",
    "run_query": ".querying",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

__all__ = ["IndexRequest", "UserError", "run_index", "run_info", "run_query"]
