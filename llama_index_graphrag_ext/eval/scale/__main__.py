"""The child process of one cell: ``python -m llama_index_graphrag_ext.eval.scale REQUEST``."""

import sys

from .cell import _worker

sys.exit(_worker(sys.argv[1]))
