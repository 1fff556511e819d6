"""Your own documents: index a folder of files with any method, update it, query it.

The ``graphrag-ext index``, ``query`` and ``info`` commands (see
``docs/own-documents.md``):

* :mod:`.reading`: files to one ``Document`` each (path = id, content hash);
* :mod:`.methods`: every registered method as a persistent, updatable index;
* :mod:`.baselines`: ``dense`` and ``bm25`` made persistent and updatable;
* :mod:`.collection`: the index folder's layout and ``collection.json``;
* :mod:`.indexing`, :mod:`.querying`: the commands.
"""

from .errors import UserError
from .indexing import IndexRequest, run_index
from .querying import run_info, run_query

__all__ = ["IndexRequest", "UserError", "run_index", "run_info", "run_query"]
